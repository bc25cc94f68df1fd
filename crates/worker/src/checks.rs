//! The readiness checks of `/readyz`: one per dependency.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::health::{Check, CheckResult};
use storage::ObjectStore;

/// The state database answers a query.
pub struct Postgres(pub sqlx::PgPool);

impl Check for Postgres {
    fn name(&self) -> &'static str {
        "postgres"
    }

    fn check(&self) -> Pin<Box<dyn Future<Output = CheckResult> + Send + '_>> {
        Box::pin(async move {
            // A pool without a connection retries a refused one silently until its acquire
            // timeout, past the check's: one connection of the check's own says why.
            if self.0.size() == 0 {
                return crate::probes::postgres(&self.0.connect_options())
                    .await
                    .map_err(|error| match error {
                        crate::dependencies::ProbeError::Unreachable(reason) => reason,
                        crate::dependencies::ProbeError::Refused { reason, fix } => {
                            format!("{reason}; {fix}")
                        }
                    });
            }
            sqlx::query("SELECT 1")
                .execute(&self.0)
                .await
                .map(drop)
                .map_err(|e| contract::redact(&e.to_string()))
        })
    }
}

/// The consumer is connected to the work queue.
pub struct RabbitMq(pub Arc<AtomicBool>);

impl Check for RabbitMq {
    fn name(&self) -> &'static str {
        "rabbitmq"
    }

    fn check(&self) -> Pin<Box<dyn Future<Output = CheckResult> + Send + '_>> {
        let connected = self.0.load(Ordering::SeqCst);
        Box::pin(async move {
            if connected {
                Ok(())
            } else {
                Err("not connected to the work queue".to_owned())
            }
        })
    }
}

/// The MQTT mirror's publisher is connected (only when the mirror is on).
pub struct Mqtt(pub Arc<publisher::mqtt::MqttPublisher>);

impl Check for Mqtt {
    fn name(&self) -> &'static str {
        "mqtt"
    }

    fn check(&self) -> Pin<Box<dyn Future<Output = CheckResult> + Send + '_>> {
        let connected = self.0.is_connected();
        Box::pin(async move {
            if connected {
                Ok(())
            } else {
                Err("not connected to the MQTT broker".to_owned())
            }
        })
    }
}

/// The results bucket answers `HeadBucket`.
pub struct ObjectStorage(pub ObjectStore);

impl Check for ObjectStorage {
    fn name(&self) -> &'static str {
        "s3"
    }

    fn check(&self) -> Pin<Box<dyn Future<Output = CheckResult> + Send + '_>> {
        Box::pin(async move {
            self.0
                .head_bucket()
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
    }
}

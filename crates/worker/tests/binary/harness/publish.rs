//! Messages for the work queue: [`World::submit`] signs a job as the Manager does
//! ([`World::submit_job`]: a plain one);
//! [`Headers`], [`signed`] and [`publish`] make any other message, typed headers and all.

use contract::envelope::{self, Route};
use lapin::options::BasicPublishOptions;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel};
use uuid::Uuid;

use super::World;

impl World {
    /// A job body for the source database.
    pub fn job_body(
        &self,
        job_id: Uuid,
        connection: &str,
        table: &str,
        fields: &[&str],
    ) -> Vec<u8> {
        serde_json::json!({
            "jobId": job_id,
            "mappedFields": {connection: {table: fields}},
            "metadata": {"source": "e2e", "correlationId": self.id},
        })
        .to_string()
        .into_bytes()
    }

    /// Publishes the [`job_body`](Self::job_body) of `job_id` signed, single-tenant, with no
    /// other header: a job as most tests send it.
    pub async fn submit_job(&self, job_id: Uuid, connection: &str, table: &str, fields: &[&str]) {
        self.submit(&self.job_body(job_id, connection, table, fields), None, &[])
            .await;
    }

    /// A small job (three rows of `src`'s `payments`) submitted as by
    /// [`submit_job`](Self::submit_job), its `job.completed` event waited for on `events` (a
    /// minute at most): a job as the benches and many tests run it.
    pub async fn completed_small_job(&self, events: &mut super::Listener) -> Uuid {
        let job_id = Uuid::now_v7();
        self.submit_job(job_id, "src", "payments", &["id"]).await;
        let event = events
            .event_for(job_id, std::time::Duration::from_secs(60))
            .await;
        assert_eq!(event.delivery.routing_key.as_str(), "job.completed");
        job_id
    }

    /// Publishes `body` to the work queue, signed with the internal key.
    pub async fn submit(&self, body: &[u8], tenant: Option<&str>, extra: &[(&str, &str)]) {
        self.submit_signed_at(body, tenant, extra, chrono::Utc::now().timestamp())
            .await;
    }

    /// [`submit`](Self::submit), signed as of Unix second `signed_at`.
    pub async fn submit_signed_at(
        &self,
        body: &[u8],
        tenant: Option<&str>,
        extra: &[(&str, &str)],
        signed_at: i64,
    ) {
        let route = Route {
            tenant: tenant.unwrap_or(""),
            exchange: "",
            routing_key: &self.queue,
        };
        let signature = envelope::sign(signed_at, &route, body, |p| {
            self.keys.internal_hmac().sign_hex(p)
        });
        let mut headers = vec![
            (envelope::SIGNATURE_HEADER, signature.signature.clone()),
            (envelope::TIMESTAMP_HEADER, signature.timestamp.clone()),
            (envelope::VERSION_HEADER, signature.version.to_owned()),
        ];
        if let Some(tenant) = tenant {
            headers.push(("X-Tenant-ID", tenant.to_owned()));
        }
        for (name, value) in extra {
            headers.retain(|(n, _)| n != name);
            headers.push((name, value.to_string()));
        }
        self.publish_raw(body, &headers).await;
    }

    /// Publishes to the work queue with exactly these headers.
    pub async fn publish_raw(&self, body: &[u8], headers: &[(&str, String)]) {
        let headers = headers
            .iter()
            .fold(Headers::default(), |all, (name, value)| {
                all.text(name, value)
            });
        publish(&self.broker.channel, "", &self.queue, body, &headers).await;
    }
}

/// Header that marks a test run's messages; the broker keeps it on dead-lettered copies, so a
/// run counts its own dead letters on the shared `fetcher.dlx`.
pub const RUN_HEADER: &str = "X-Test-Run";

/// Headers of one message, each value with its AMQP type.
#[derive(Default, Clone)]
pub struct Headers(pub Vec<(String, AMQPValue)>);

impl Headers {
    pub fn text(mut self, name: &str, value: &str) -> Headers {
        self.0.push((
            name.to_owned(),
            AMQPValue::LongString(LongString::from(value)),
        ));
        self
    }

    pub fn bytes(mut self, name: &str, value: &[u8]) -> Headers {
        self.0.push((
            name.to_owned(),
            AMQPValue::LongString(LongString::from(value.to_vec())),
        ));
        self
    }

    pub fn value(mut self, name: &str, value: AMQPValue) -> Headers {
        self.0.push((name.to_owned(), value));
        self
    }

    pub fn without(mut self, name: &str) -> Headers {
        self.0.retain(|(n, _)| n != name);
        self
    }

    pub fn table(&self) -> FieldTable {
        let mut table = FieldTable::default();
        for (name, value) in &self.0 {
            table.insert(name.as_str().into(), value.clone());
        }
        table
    }
}

/// The three signature headers of `body` signed with the internal key at `t` for `route`, plus
/// the run marker (and `X-Tenant-ID` when `tenant` is given).
pub fn signed(
    world: &World,
    t: i64,
    route: &Route<'_>,
    body: &[u8],
    tenant: Option<&str>,
) -> Headers {
    let signature = envelope::sign(t, route, body, |p| world.keys.internal_hmac().sign_hex(p));
    let mut headers = Headers::default()
        .text(RUN_HEADER, &world.id)
        .text(envelope::SIGNATURE_HEADER, &signature.signature)
        .text(envelope::TIMESTAMP_HEADER, &signature.timestamp)
        .text(envelope::VERSION_HEADER, signature.version);
    if let Some(tenant) = tenant {
        headers = headers.text("X-Tenant-ID", tenant);
    }
    headers
}

/// The route of a message published straight to the world's work queue.
pub fn work_route<'a>(world: &'a World, tenant: &'a str) -> Route<'a> {
    Route {
        tenant,
        exchange: "",
        routing_key: &world.queue,
    }
}

/// Publishes to `exchange` / `routing_key` on `channel` without waiting for a confirm.
pub async fn publish(
    channel: &Channel,
    exchange: &str,
    routing_key: &str,
    body: &[u8],
    headers: &Headers,
) {
    channel
        .basic_publish(
            exchange.into(),
            routing_key.into(),
            BasicPublishOptions::default(),
            body,
            BasicProperties::default()
                .with_delivery_mode(2)
                .with_headers(headers.table()),
        )
        .await
        .expect("publish");
}

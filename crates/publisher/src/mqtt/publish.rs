//! [`MqttPublisher`]: the handle the relay publishes through.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::config::MqttConfig;
use super::driver::{Command, Driver};
use super::error::MqttError;

/// One message of the mirror: its topic and its frozen payload.
#[derive(Debug, Clone, Copy)]
pub struct MqttMessage<'a> {
    /// The AMQP routing key of the event it mirrors: the metrics' label.
    pub routing_key: &'static str,
    pub topic: &'a str,
    pub payload: &'a [u8],
}

/// Publishes QoS 1 messages and tells, per message, whether its PUBACK arrived.
pub struct MqttPublisher {
    commands: mpsc::Sender<Command>,
    connected: Arc<AtomicBool>,
    ack_timeout: Duration,
    stop: CancellationToken,
    driver: tokio::sync::Mutex<Option<JoinHandle<()>>>,
}

impl MqttPublisher {
    /// Starts the driver, which connects in the background and keeps reconnecting; the
    /// publisher is usable at once (publishes fail with [`MqttError::NotConnected`] until the
    /// broker's CONNACK). Errors are the configuration's only.
    pub fn start(config: &MqttConfig) -> Result<MqttPublisher, MqttError> {
        let options = config.options()?;
        let (commands, receiver) = mpsc::channel(usize::from(config.in_flight.max(1)));
        let connected = Arc::new(AtomicBool::new(false));
        let stop = CancellationToken::new();
        let driver = Driver::new(options, config, receiver, connected.clone(), stop.clone());
        Ok(MqttPublisher {
            commands,
            connected,
            ack_timeout: config.ack_timeout,
            stop,
            driver: tokio::sync::Mutex::new(Some(tokio::spawn(driver.run()))),
        })
    }

    /// Whether the broker accepted our connection and it has not broken since: `/readyz`'s
    /// `mqtt` check, and the relay's hint not to lease rows it cannot publish.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// Publishes every message, QoS 1, retain off, all in flight before any PUBACK is awaited
    /// (at most `in_flight` at once; the rest wait for room). One result per message, in order:
    /// `Ok` only when the broker's PUBACK of its packet arrived.
    pub async fn publish_batch(&self, messages: &[MqttMessage<'_>]) -> Vec<Result<(), MqttError>> {
        let mut waiting = Vec::with_capacity(messages.len());
        for message in messages {
            let (done, outcome) = oneshot::channel();
            let command = Command {
                topic: message.topic.to_owned(),
                payload: message.payload.to_vec(),
                done,
            };
            let sent = if self.is_connected() {
                self.commands
                    .send(command)
                    .await
                    .map_err(|_| MqttError::Closed)
            } else {
                Err(MqttError::NotConnected)
            };
            waiting.push((sent, outcome));
        }
        let deadline = tokio::time::Instant::now() + self.ack_timeout;
        let outcomes = waiting.into_iter().map(|(sent, outcome)| async move {
            sent?;
            match tokio::time::timeout_at(deadline, outcome).await {
                Ok(Ok(result)) => result,
                Ok(Err(_)) => Err(MqttError::ConnectionLost),
                Err(_) => Err(MqttError::AckTimeout(self.ack_timeout)),
            }
        });
        let results = join_all(outcomes).await;
        for (message, result) in messages.iter().zip(&results) {
            crate::metrics::mqtt_outcome(message.routing_key, result);
        }
        results
    }

    /// Disconnects and stops the driver; publishes in flight fail with [`MqttError::Closed`].
    pub async fn close(&self) {
        self.stop.cancel();
        if let Some(driver) = self.driver.lock().await.take() {
            let _ = driver.await;
        }
    }
}

impl Drop for MqttPublisher {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

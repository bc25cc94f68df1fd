//! The [`Publisher`]: signed, confirmed, mandatory publishes of terminal job events.

use std::fmt;
use std::time::Duration;

use contract::event::OutboundEvent;
use crypto::HmacKey;
use futures_util::future::join_all;
use lapin::options::{BasicPublishOptions, ExchangeDeclareOptions};
use lapin::types::{FieldTable, ShortString};
use lapin::{BasicProperties, ExchangeKind};
use tokio::time::{timeout_at, Instant};

use crate::config::PublisherConfig;
use crate::confirm::{self, Confirmed};
use crate::error::{PublishError, Result};
use crate::link::Link;
use crate::message;
use crate::metrics;

/// Publishes terminal job events to the events exchange (contract §8).
///
/// A publish counts only when the broker confirmed it (`basic.ack`) and did not return it as
/// unroutable. The connection and its channels are opened on first use and reopened by the
/// next call after any failure, so the publisher outlives broker restarts; it never retries by
/// itself. Shareable across tasks (`&self` everywhere).
pub struct Publisher {
    link: Link,
    exchange: String,
    /// `exchange` as the AMQP short string lapin takes, checked once.
    exchange_name: ShortString,
    confirm_timeout: Duration,
    key: HmacKey,
}

impl fmt::Debug for Publisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Publisher")
            .field("exchange", &self.exchange)
            .field("confirm_timeout", &self.confirm_timeout)
            .field("connected", &self.is_connected())
            .finish_non_exhaustive()
    }
}

impl Publisher {
    /// A publisher for `config`, signing with the **external** HMAC key. Connects lazily: nothing
    /// touches the network until the first publish or [`Publisher::declare_exchange`].
    pub fn new(config: PublisherConfig, signing_key: HmacKey) -> Result<Publisher> {
        if config.exchange.is_empty() {
            return Err(PublishError::Config("the events exchange name is empty"));
        }
        let exchange_name = ShortString::try_new(config.exchange.as_str())
            .map_err(|_| PublishError::Config("the events exchange name exceeds 255 bytes"))?;
        let link = Link::new(
            config.amqp_uri.expose(),
            config.connection_name,
            config.connect_timeout,
            config.channels,
        )?;
        Ok(Publisher {
            link,
            exchange: config.exchange,
            exchange_name,
            confirm_timeout: config.confirm_timeout,
            key: signing_key,
        })
    }

    /// The events exchange.
    pub fn exchange(&self) -> &str {
        &self.exchange
    }

    /// Whether the broker connection is open now (for readiness checks). `false` before the first
    /// publish or declare, and after a failure until the next call reconnects.
    pub fn is_connected(&self) -> bool {
        self.link.is_connected()
    }

    /// Declares the events exchange: topic, durable. Idempotent; fails when the exchange exists
    /// with other properties. Connects when needed.
    pub async fn declare_exchange(&self) -> Result<()> {
        let mut lane = self.link.lane().await;
        let channel = lane.channel().await?;
        let options = ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        };
        let declared = channel
            .exchange_declare(
                self.exchange_name.clone(),
                ExchangeKind::Topic,
                options,
                FieldTable::default(),
            )
            .await
            .map_err(PublishError::Declare);
        if let Err(error) = &declared {
            lane.discard(error).await;
        }
        declared
    }

    /// Publishes one event and waits for its confirm.
    pub async fn publish(&self, event: &OutboundEvent) -> Result<()> {
        match self.publish_batch(std::slice::from_ref(event)).await.pop() {
            Some(result) => result,
            // `send_and_confirm` pushes exactly one result per event before any early return.
            None => unreachable!("publish_batch returns one result per event"),
        }
    }

    /// Publishes every event, then waits for all their confirms: the messages are pipelined on
    /// one channel, not one round trip each. Returns one result per event, in order. All
    /// messages share one deadline of `confirm_timeout` from the start of sending.
    pub async fn publish_batch(&self, events: &[OutboundEvent]) -> Vec<Result<()>> {
        let results = self.send_and_confirm(events).await;
        for (event, result) in events.iter().zip(&results) {
            metrics::outcome(event.routing_key(), result);
        }
        results
    }

    /// Closes the channels and the connection (shutdown). A later publish reconnects.
    pub async fn close(&self) {
        self.link.close().await;
    }

    async fn send_and_confirm(&self, events: &[OutboundEvent]) -> Vec<Result<()>> {
        if events.is_empty() {
            return Vec::new();
        }
        // Sign everything before taking a channel: it is CPU work that needs no lane. One `t`
        // for the whole batch.
        let now = chrono::Utc::now().timestamp();
        let mut results: Vec<Result<()>> = Vec::with_capacity(events.len());
        let mut properties: Vec<Option<BasicProperties>> = Vec::with_capacity(events.len());
        for event in events {
            match message::properties(event, &self.exchange, now, &self.key) {
                Ok(built) => {
                    properties.push(Some(built));
                    results.push(Ok(()));
                }
                Err(error) => {
                    properties.push(None);
                    results.push(Err(error));
                }
            }
        }
        if properties.iter().all(Option::is_none) {
            return results;
        }

        let mut lane = self.link.lane().await;
        let channel = match lane.channel().await {
            Ok(channel) => channel,
            Err(error) => {
                fail_pending(&mut results, &error);
                return results;
            }
        };

        let deadline = Instant::now() + self.confirm_timeout;
        let options = BasicPublishOptions {
            mandatory: true,
            immediate: false,
        };
        // Every publish future is polled at once, so all frames are queued for the socket back
        // to back before any confirm is awaited.
        let sends = properties
            .iter_mut()
            .zip(events)
            .enumerate()
            .filter_map(|(index, (built, event))| built.take().map(|built| (index, event, built)))
            .map(|(index, event, built)| {
                let channel = &channel;
                let exchange = self.exchange_name.clone();
                async move {
                    let sent = channel
                        .basic_publish(
                            exchange,
                            ShortString::from(event.routing_key()),
                            options,
                            &event.body,
                            built,
                        )
                        .await;
                    (index, sent)
                }
            });
        let Ok(sent) = timeout_at(deadline, join_all(sends)).await else {
            // The socket did not take the frames in time (flow control, dead peer).
            let error = PublishError::ConfirmTimeout(self.confirm_timeout);
            fail_pending(&mut results, &error);
            lane.discard(&error).await;
            return results;
        };

        let timeout = self.confirm_timeout;
        let confirms = sent.into_iter().map(|(index, sent)| async move {
            let confirmed: Confirmed = match sent {
                Ok(pending) => match timeout_at(deadline, pending).await {
                    Ok(Ok(confirmation)) => (index, Ok(confirmation)),
                    Ok(Err(error)) => (index, Err(PublishError::Channel(error))),
                    Err(_) => (index, Err(PublishError::ConfirmTimeout(timeout))),
                },
                Err(error) => (index, Err(PublishError::Channel(error))),
            };
            confirmed
        });
        let confirmed = join_all(confirms).await;
        if let Some(error) = confirm::settle(events, confirmed, &mut results) {
            lane.discard(&error).await;
        }
        results
    }
}

/// Fails every event that is still waiting (built, not yet failed) with `error`.
fn fail_pending(results: &mut [Result<()>], error: &PublishError) {
    for result in results.iter_mut().filter(|r| r.is_ok()) {
        *result = Err(error.clone());
    }
}

//! The publisher of each outbox sink: the AMQP events exchange or the MQTT mirror, behind one
//! shape so the relay and the repairer treat both alike.

use std::fmt;
use std::sync::Arc;

use outbox::{PendingEvent, Sink};
use publisher::mqtt::{MqttError, MqttMessage, MqttPublisher};
use publisher::{PublishError, Publisher};

/// Who publishes a sink's rows.
#[derive(Clone)]
pub enum SinkPublisher {
    Amqp(Arc<Publisher>),
    Mqtt(Arc<MqttPublisher>),
}

impl From<Arc<Publisher>> for SinkPublisher {
    fn from(publisher: Arc<Publisher>) -> SinkPublisher {
        SinkPublisher::Amqp(publisher)
    }
}

impl From<Arc<MqttPublisher>> for SinkPublisher {
    fn from(publisher: Arc<MqttPublisher>) -> SinkPublisher {
        SinkPublisher::Mqtt(publisher)
    }
}

/// Why one row was not published.
#[derive(Debug, Clone)]
pub enum Failure {
    Amqp(PublishError),
    Mqtt(MqttError),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Amqp(error) => error.fmt(f),
            Failure::Mqtt(error) => error.fmt(f),
        }
    }
}

impl Failure {
    /// A failure of this one event while the broker itself answered: publishing other events
    /// now can still succeed.
    pub fn is_rejection(&self) -> bool {
        match self {
            Failure::Amqp(error) => error.is_rejection(),
            Failure::Mqtt(error) => error.is_rejection(),
        }
    }

    /// The AMQP broker returned it: no queue is bound for its routing key.
    pub fn is_unroutable(&self) -> bool {
        matches!(self, Failure::Amqp(PublishError::Returned { .. }))
    }
}

/// One result per event of a batch, in order.
pub type Outcomes = Vec<Result<(), Failure>>;

impl SinkPublisher {
    /// The rows it publishes.
    pub fn sink(&self) -> Sink {
        match self {
            SinkPublisher::Amqp(_) => Sink::Amqp,
            SinkPublisher::Mqtt(_) => Sink::Mqtt,
        }
    }

    /// Whether publishing can succeed now. The MQTT publisher knows (it holds one connection and
    /// reconnects by itself); the AMQP one connects on the next publish, so it is always worth
    /// a try.
    pub fn is_connected(&self) -> bool {
        match self {
            SinkPublisher::Amqp(_) => true,
            SinkPublisher::Mqtt(publisher) => publisher.is_connected(),
        }
    }

    /// Publishes the batch, pipelined, and returns each event's outcome.
    pub async fn send(&self, events: &[PendingEvent]) -> Outcomes {
        if events.is_empty() {
            return Vec::new();
        }
        match self {
            SinkPublisher::Amqp(publisher) => {
                let outbound: Vec<_> = events.iter().map(|p| p.event.clone()).collect();
                publisher
                    .publish_batch(&outbound)
                    .await
                    .into_iter()
                    .map(|outcome| outcome.map_err(Failure::Amqp))
                    .collect()
            }
            SinkPublisher::Mqtt(publisher) => {
                // A row of another sink, or an MQTT row without its topic, is never sent.
                let messages: Vec<Option<MqttMessage<'_>>> = events
                    .iter()
                    .map(|pending| {
                        let topic = pending
                            .topic
                            .as_deref()
                            .filter(|_| pending.sink == Sink::Mqtt)?;
                        Some(MqttMessage {
                            routing_key: pending.event.routing_key(),
                            topic,
                            payload: &pending.event.body,
                        })
                    })
                    .collect();
                let sendable: Vec<MqttMessage<'_>> = messages.iter().flatten().copied().collect();
                let mut sent = publisher.publish_batch(&sendable).await.into_iter();
                messages
                    .iter()
                    .map(|message| match message {
                        Some(_) => sent
                            .next()
                            .unwrap_or(Err(MqttError::Closed))
                            .map_err(Failure::Mqtt),
                        None => Err(Failure::Mqtt(MqttError::Message(
                            "the outbox row is not an MQTT row with a topic",
                        ))),
                    })
                    .collect()
            }
        }
    }
}

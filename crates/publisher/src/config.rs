//! The publisher's own configuration, with the AMQP URI kept as a secret.

use std::fmt;
use std::time::Duration;

/// The broker URI (`amqp://user:password@host:port/vhost`). It carries a password, so `Debug`
/// prints `AmqpUri(<redacted>)` and there is no `Display`; the text is only handed to the parser.
#[derive(Clone, PartialEq, Eq)]
pub struct AmqpUri(String);

impl AmqpUri {
    pub fn new(uri: impl Into<String>) -> AmqpUri {
        AmqpUri(uri.into())
    }

    /// **Reveals the URI**, password included. For the connector only; never log it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AmqpUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AmqpUri(<redacted>)")
    }
}

impl From<String> for AmqpUri {
    fn from(uri: String) -> Self {
        AmqpUri(uri)
    }
}

/// What [`Publisher::new`](crate::Publisher::new) needs. Build it with [`PublisherConfig::new`]
/// and adjust the public fields.
#[derive(Debug, Clone)]
pub struct PublisherConfig {
    /// The broker to publish to (a secret: never logged).
    pub amqp_uri: AmqpUri,
    /// The events exchange (`RABBITMQ_JOB_EVENTS_EXCHANGE`), a durable topic exchange.
    pub exchange: String,
    /// How long a publish waits for the broker's confirm before it counts as failed.
    pub confirm_timeout: Duration,
    /// How long one connection attempt (TCP, AMQP handshake) may take.
    pub connect_timeout: Duration,
    /// How many channels publish concurrently on the one connection. Each call to `publish` or
    /// `publish_batch` holds one channel until its confirms are in, so that the broker's
    /// returns on that channel can only belong to that call.
    pub channels: usize,
    /// The connection name shown by the broker (`rabbitmqctl list_connections client_properties`).
    pub connection_name: String,
}

impl PublisherConfig {
    /// Defaults: 10 s confirm timeout, 5 s connect timeout, 4 channels.
    pub fn new(amqp_uri: AmqpUri, exchange: impl Into<String>) -> PublisherConfig {
        PublisherConfig {
            amqp_uri,
            exchange: exchange.into(),
            confirm_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            channels: 4,
            connection_name: "fetcher-worker-publisher".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_uri() {
        let config = PublisherConfig::new(
            AmqpUri::new("amqp://fetcher:s3cr3t-pass@rabbit.internal:5672/%2f"),
            "fetcher.job.events",
        );
        let printed = format!("{config:?}");
        assert!(!printed.contains("s3cr3t-pass"), "{printed}");
        assert!(!printed.contains("rabbit.internal"), "{printed}");
        assert!(printed.contains("AmqpUri(<redacted>)"), "{printed}");
        assert!(printed.contains("fetcher.job.events"), "{printed}");
    }
}

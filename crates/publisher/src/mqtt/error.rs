//! Why an MQTT publish did not count, and whether trying again later can help.

use std::time::Duration;

/// A failed MQTT publish or setting. No variant carries the URL's credentials, the password or
/// a payload.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MqttError {
    /// The configuration cannot work (the URL does not parse, the CA file does not read).
    #[error("invalid MQTT configuration: {0}")]
    Config(String),
    /// Not connected to the broker (connecting, or reconnecting after a failure).
    #[error("not connected to the MQTT broker")]
    NotConnected,
    /// The connection broke while the publish waited for its PUBACK.
    #[error("the MQTT connection broke before the broker acknowledged the message")]
    ConnectionLost,
    /// No PUBACK within the ack timeout.
    #[error("no PUBACK from the MQTT broker within {0:?}")]
    AckTimeout(Duration),
    /// The message cannot be published (a topic with a wildcard, a payload over the limit).
    #[error("cannot publish the MQTT message: {0}")]
    Message(&'static str),
    /// The publisher was closed.
    #[error("the MQTT publisher is closed")]
    Closed,
}

impl MqttError {
    /// A stable, low-cardinality label for metrics and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            MqttError::Config(_) => "config",
            MqttError::NotConnected => "not_connected",
            MqttError::ConnectionLost => "connection_lost",
            MqttError::AckTimeout(_) => "ack_timeout",
            MqttError::Message(_) => "message",
            MqttError::Closed => "closed",
        }
    }

    /// A failure of this message while the broker itself is there: publishing others now can
    /// still succeed.
    pub fn is_rejection(&self) -> bool {
        matches!(self, MqttError::Message(_))
    }
}

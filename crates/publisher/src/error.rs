//! Why a publish failed, named after the failing step, and whether retrying can help.

use std::time::Duration;

use lapin::protocol::{AMQPErrorKind, AMQPHardError, AMQPSoftError};

/// `Result` with a [`PublishError`].
pub type Result<T> = std::result::Result<T, PublishError>;

/// A failed step of publishing. No variant carries the AMQP URI, a key or an event body.
///
/// `Clone` because one broken channel fails every message of a batch in flight on it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PublishError {
    /// The configuration cannot work (the URI does not parse, a name is too long for AMQP).
    #[error("invalid publisher configuration: {0}")]
    Config(&'static str),
    /// Connecting to the broker failed (refused, handshake, authentication).
    #[error("failed to connect to the broker")]
    Connect(#[source] lapin::Error),
    /// Connecting to the broker, or opening a channel on it, took longer than the connect
    /// timeout.
    #[error("connecting to the broker timed out after {0:?}")]
    ConnectTimeout(Duration),
    /// Opening a channel, enabling confirms, sending the message, or the channel closing while
    /// the confirm was pending (for example, the exchange does not exist).
    #[error("AMQP channel failed")]
    Channel(#[source] lapin::Error),
    /// Declaring the exchange failed.
    #[error("failed to declare the exchange")]
    Declare(#[source] lapin::Error),
    /// The event cannot be expressed as an AMQP message (a value too long for its field).
    #[error("cannot build the AMQP message: {0}")]
    Message(&'static str),
    /// The broker confirmed the message but returned it as unroutable: no queue is bound for
    /// its routing key. The event is not delivered to anyone.
    #[error("the broker returned the message as unroutable ({reply_code} {reply_text})")]
    Returned { reply_code: u16, reply_text: String },
    /// The broker refused responsibility for the message (`basic.nack`).
    #[error("the broker rejected the message (nack)")]
    Nack,
    /// The channel had no publisher confirms enabled; the outcome is unknown.
    #[error("the broker did not confirm the message (confirms not enabled)")]
    NotConfirmed,
    /// No confirm arrived within the confirm timeout.
    #[error("no confirm from the broker within {0:?}")]
    ConfirmTimeout(Duration),
}

impl PublishError {
    /// Whether trying the same publish again later may succeed. Broker outages, closed
    /// channels, nacks, missing confirms and unroutable returns (a consumer may bind its queue
    /// later) are transient; a bad configuration, a message that cannot be built, and an exchange
    /// declared with other properties or refused to our user are not.
    pub fn is_retriable(&self) -> bool {
        match self {
            PublishError::Config(_) | PublishError::Message(_) => false,
            PublishError::Declare(error) | PublishError::Connect(error) => {
                !is_permanent_refusal(error)
            }
            PublishError::ConnectTimeout(_)
            | PublishError::Channel(_)
            | PublishError::Returned { .. }
            | PublishError::Nack
            | PublishError::NotConfirmed
            | PublishError::ConfirmTimeout(_) => true,
        }
    }

    /// A failure of this one event while the broker itself answered (returned as unroutable,
    /// nacked, or not expressible as a message): publishing other events now can still succeed.
    pub fn is_rejection(&self) -> bool {
        matches!(
            self,
            PublishError::Returned { .. } | PublishError::Nack | PublishError::Message(_)
        )
    }

    /// A stable, low-cardinality label for metrics and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            PublishError::Config(_) => "config",
            PublishError::Connect(_) => "connect",
            PublishError::ConnectTimeout(_) => "connect_timeout",
            PublishError::Channel(_) => "channel",
            PublishError::Declare(_) => "declare",
            PublishError::Message(_) => "message",
            PublishError::Returned { .. } => "returned",
            PublishError::Nack => "nack",
            PublishError::NotConfirmed => "not_confirmed",
            PublishError::ConfirmTimeout(_) => "confirm_timeout",
        }
    }
}

/// The broker refused for a reason that waiting will not fix: a declaration that conflicts with
/// the existing exchange, or a user without the rights.
fn is_permanent_refusal(error: &lapin::Error) -> bool {
    let lapin::ErrorKind::ProtocolError(amqp) = error.kind() else {
        return false;
    };
    matches!(
        amqp.kind(),
        AMQPErrorKind::Soft(AMQPSoftError::PRECONDITIONFAILED)
            | AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED)
            | AMQPErrorKind::Hard(AMQPHardError::NOTALLOWED)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::protocol::AMQPError;

    fn protocol(kind: AMQPErrorKind) -> lapin::Error {
        lapin::ErrorKind::ProtocolError(AMQPError::new(kind, "test".into())).into()
    }

    #[test]
    fn transient_failures_are_retriable() {
        let io: lapin::Error = lapin::ErrorKind::IOError(std::sync::Arc::new(
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        ))
        .into();
        for error in [
            PublishError::Connect(io.clone()),
            PublishError::ConnectTimeout(Duration::from_secs(1)),
            PublishError::Channel(protocol(AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND))),
            PublishError::Returned {
                reply_code: 312,
                reply_text: "NO_ROUTE".into(),
            },
            PublishError::Nack,
            PublishError::ConfirmTimeout(Duration::from_secs(1)),
            PublishError::Declare(io),
        ] {
            assert!(error.is_retriable(), "{error:?}");
        }
    }

    #[test]
    fn permanent_failures_are_not_retriable() {
        for error in [
            PublishError::Config("bad"),
            PublishError::Message("bad"),
            PublishError::Declare(protocol(AMQPErrorKind::Soft(
                AMQPSoftError::PRECONDITIONFAILED,
            ))),
            PublishError::Connect(protocol(AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED))),
        ] {
            assert!(!error.is_retriable(), "{error:?}");
        }
    }

    #[test]
    fn reasons_are_distinct() {
        let reasons = [
            PublishError::Config("x").reason(),
            PublishError::Message("x").reason(),
            PublishError::Nack.reason(),
            PublishError::NotConfirmed.reason(),
            PublishError::ConfirmTimeout(Duration::ZERO).reason(),
            PublishError::ConnectTimeout(Duration::ZERO).reason(),
            PublishError::Returned {
                reply_code: 312,
                reply_text: String::new(),
            }
            .reason(),
        ];
        let unique: std::collections::HashSet<_> = reasons.iter().collect();
        assert_eq!(unique.len(), reasons.len());
    }
}

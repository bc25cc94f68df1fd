//! Names on the wire that the Worker, its publisher and `fetcherctl` must spell alike: message
//! headers beyond the signature's own (those are in [`crate::envelope`]), the headers of a dead
//! letter the Worker refused (their stamp's text is [`crate::dead_letter`]), the work queue's
//! conventional name, and the dead-letter topologies a provisioned work queue may have.

/// `X-Tenant-ID`: the job's tenant (signed as part of the route, contract §3).
pub const TENANT_HEADER: &str = "X-Tenant-ID";
/// `X-Request-Id`: correlation for the Worker's logs and the job's events.
pub const REQUEST_ID_HEADER: &str = "X-Request-Id";
/// `jobId`: lets a message whose body cannot be parsed still fail its job (contract §4).
pub const JOB_ID_HEADER: &str = "jobId";
/// `x-fetcher-reason`: why the Worker refused a message it dead-lettered (the reason of its log
/// line and of `fetcher_messages_rejected_total{reason}`: `signature_invalid`, `tenant_mismatch`, ...).
/// RabbitMQ's own `x-death` cannot carry it: `basic.reject` takes no headers, so the Worker
/// publishes the dead letter itself, these headers added to the message's own.
pub const DEAD_LETTER_REASON_HEADER: &str = "x-fetcher-reason";
/// `x-fetcher-queue`: the queue the refused message was consumed from.
pub const DEAD_LETTER_QUEUE_HEADER: &str = "x-fetcher-queue";
/// `x-fetcher-exchange`: the exchange the refused message was published to (its signed route).
pub const DEAD_LETTER_EXCHANGE_HEADER: &str = "x-fetcher-exchange";
/// `x-fetcher-routing-key`: the routing key it was published with (its signed route).
pub const DEAD_LETTER_ROUTING_KEY_HEADER: &str = "x-fetcher-routing-key";
/// `x-fetcher-refused-at`: when it was refused (an AMQP timestamp, seconds since the epoch).
pub const DEAD_LETTER_AT_HEADER: &str = "x-fetcher-refused-at";
/// `x-fetcher-stamp`: the Worker's HMAC (internal key, lowercase hex) over the five headers
/// above and the body's SHA-256, as [`crate::dead_letter::Stamp`] writes them. Anyone who may
/// publish to the work queue can set the other `x-fetcher-*` headers; only the Worker can stamp
/// them, so a dead letter without a stamp that verifies is not the Worker's.
pub const DEAD_LETTER_STAMP_HEADER: &str = "x-fetcher-stamp";

/// The work queue's conventional name (contract §4; `RABBITMQ_FETCHER_WORK_QUEUE`'s default).
pub const DEFAULT_WORK_QUEUE: &str = "fetcher.extract-external-data.queue";

/// Where a work queue dead-letters: its `x-dead-letter-exchange` and `x-dead-letter-routing-key`,
/// and the queue bound there that keeps the letters. The Worker follows the one the work queue
/// was provisioned with; `fetcherctl dlq` looks for its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetters {
    pub exchange: &'static str,
    pub routing_key: &'static str,
    pub queue: &'static str,
    /// Who provisions it this way, for messages.
    pub origin: &'static str,
}

/// Upstream repository's broker definitions (and `deploy/rabbitmq/definitions.json`): what the
/// Worker declares when the work queue does not exist.
pub const REPOSITORY_DEAD_LETTERS: DeadLetters = DeadLetters {
    exchange: "fetcher.dlx",
    routing_key: "fetcher.dlq.key",
    queue: "fetcher.dlq",
    origin: "upstream's repository definitions",
};

/// LerianStudio's Helm chart (`load_definitions.json`), which names them after the work queue.
pub const HELM_DEAD_LETTERS: DeadLetters = DeadLetters {
    exchange: "fetcher.extract-external-data.dlx",
    routing_key: "fetcher.extract-external-data.dlq.key",
    queue: "fetcher.extract-external-data.dlq",
    origin: "LerianStudio's Helm chart",
};

/// Every dead-letter topology a provisioned work queue may have, the repository's first.
pub const KNOWN_DEAD_LETTERS: [DeadLetters; 2] = [REPOSITORY_DEAD_LETTERS, HELM_DEAD_LETTERS];

/// The broker URI the Worker composes from `RABBITMQ_URI` (the scheme, when it is not a whole
/// URI), `RABBITMQ_HOST`, `RABBITMQ_PORT_AMQP`, `RABBITMQ_DEFAULT_USER`, `RABBITMQ_DEFAULT_PASS`
/// and `RABBITMQ_VHOST`: `<scheme>://<user>:<password>@<host>:<port>/<vhost>`, the user, the
/// password and the vhost percent-encoded. `fetcherctl` composes it by the same rule.
pub fn broker_uri(
    scheme: &str,
    host: &str,
    port: u16,
    user: &str,
    password: &str,
    vhost: &str,
) -> String {
    format!(
        "{scheme}://{}:{}@{host}:{port}/{}",
        percent_encode(user),
        percent_encode(password),
        percent_encode(vhost)
    )
}

/// Percent-encodes a URI user, password or vhost (RFC 3986 unreserved characters stay).
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_password_and_vhost_are_percent_encoded() {
        assert_eq!(
            broker_uri("amqps", "mq.internal", 5671, "svc user", "p@ss:w/rd%", "/"),
            "amqps://svc%20user:p%40ss%3Aw%2Frd%25@mq.internal:5671/%2F"
        );
        assert_eq!(
            broker_uri("amqp", "127.0.0.1", 5672, "a-b.c_d~e", "guest", "tenant-1"),
            "amqp://a-b.c_d~e:guest@127.0.0.1:5672/tenant-1"
        );
    }
}

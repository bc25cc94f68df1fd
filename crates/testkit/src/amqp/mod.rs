//! The real local RabbitMQ, per test: exchanges and queues with random names, removed at the end.
//!
//! The broker is `TEST_AMQP_URI`, default [`DEFAULT_AMQP_URI`] (what
//! `scripts/services.sh rabbitmq` provides).

mod broker;
mod delivery;
mod node;

pub use broker::Broker;
pub use delivery::{byte_array, collect, header, long_string};
pub use node::{rabbitmqctl, RestartGuard};

use uuid::Uuid;

/// The broker used when `TEST_AMQP_URI` is unset.
pub const DEFAULT_AMQP_URI: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// `TEST_AMQP_URI`, or the local broker.
pub fn amqp_uri() -> String {
    std::env::var("TEST_AMQP_URI").unwrap_or_else(|_| DEFAULT_AMQP_URI.to_owned())
}

/// A unique name for a test's exchange, queue or other resource: `<prefix>.<kind>.<uuid>`, the
/// prefix naming the crate whose tests made it (`repairer-test`).
pub fn unique(prefix: &str, kind: &str) -> String {
    format!("{prefix}.{kind}.{}", Uuid::new_v4().simple())
}

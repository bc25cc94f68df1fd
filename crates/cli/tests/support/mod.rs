//! Shared by the integration tests: the real `fetcherctl` binary with a clean environment, the
//! test master key, and a test-side connection to the real RabbitMQ (`testkit`'s [`Broker`]);
//! `watcher` runs `watch` in the background, `events` builds and signs job events.

// Not every test binary uses every helper.
#![allow(dead_code, unused_imports)]

pub mod events;
pub mod watcher;

use std::process::Command;

use crypto::KeySet;

pub use testkit::amqp::{amqp_uri, header, long_string, Broker, DEFAULT_AMQP_URI};

/// base64 of the 32 ASCII bytes `0123456789abcdef0123456789abcdef`.
pub const MASTER: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// Every variable `fetcherctl` reads, removed so the caller's shell cannot leak into a test.
const READ_VARS: &[&str] = &[
    "APP_ENC_KEY",
    "AMQP_URI",
    "RABBITMQ_URI",
    "RABBITMQ_HOST",
    "RABBITMQ_PORT_AMQP",
    "RABBITMQ_DEFAULT_USER",
    "RABBITMQ_DEFAULT_PASS",
    "RABBITMQ_VHOST",
    "RABBITMQ_FETCHER_WORK_QUEUE",
    "RABBITMQ_JOB_EVENTS_EXCHANGE",
    "FETCHER_EXTERNAL_HMAC_KEY",
    "FETCHER_INTERNAL_HMAC_KEY",
    "OBJECT_STORAGE_ENDPOINT",
    "OBJECT_STORAGE_REGION",
    "OBJECT_STORAGE_BUCKET",
    "OBJECT_STORAGE_KEY_PREFIX",
    "OBJECT_STORAGE_ACCESS_KEY_ID",
    "OBJECT_STORAGE_SECRET_KEY",
    "OBJECT_STORAGE_USE_PATH_STYLE",
];

pub fn keys() -> KeySet {
    KeySet::from_base64(MASTER).expect("test master key")
}

/// The real binary, with none of the variables it reads but `AMQP_URI` (the test broker).
pub fn fetcherctl() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fetcherctl"));
    for var in READ_VARS {
        command.env_remove(var);
    }
    command.env("AMQP_URI", amqp_uri());
    command
}

/// A unique name for this test's queue, exchange or bucket: `fetcherctl-test.<kind>.<uuid>`.
pub fn unique(kind: &str) -> String {
    testkit::amqp::unique("fetcherctl-test", kind)
}

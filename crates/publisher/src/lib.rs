//! Publishes the Worker's terminal job events to RabbitMQ (contract §8), signed (contract §3).
//!
//! A [`Publisher`] sends each [`OutboundEvent`](contract::event::OutboundEvent) to the topic
//! exchange `RABBITMQ_JOB_EVENTS_EXCHANGE` with routing key `job.<status>`, persistent,
//! `mandatory`, as a CloudEvents 1.0 binary-mode message (every `ce-*` header an AMQP byte
//! array), plus `X-Tenant-ID`, `X-Request-Id` and the three signature headers, signed at publish
//! time with the external HMAC key. Publisher confirms are on: a publish succeeds only when the
//! broker acked it and did not return it as unroutable. Batches are pipelined: every message is
//! sent before any confirm is awaited.
//!
//! The publisher does not retry. It reconnects on the next call after any failure and tells,
//! through [`PublishError::is_retriable`], whether trying again later can help; the outbox relay
//! and repairer own the retrying and the backoff.
//!
//! # Layout
//!
//! - `config`: [`PublisherConfig`] and the secret [`AmqpUri`].
//! - `publish`: [`Publisher`]: declare, publish, publish a batch, readiness, close.
//! - `message`: an event's AMQP properties and headers, and its signature.
//! - `confirm`: confirms to per-event outcomes; returned messages matched by message id.
//! - `link`: the connection and its channels (lanes), reopened after failures.
//! - `metrics`: `fetcher_events_published_total`, `fetcher_events_publish_failed_total`, `fetcher_events_returned_total`.
//! - `error`: [`PublishError`], named after the failing step, with `is_retriable`.
//! - [`mqtt`]: the MQTT mirror's publisher ([`mqtt::MqttPublisher`]), QoS 1, confirmed by
//!   PUBACK (lifecycle §5).
//!
//! # Dependencies
//!
//! `contract` (what is sent and signed) and `crypto` (the HMAC), `lapin` on tokio. Never `sqlx`,
//! the object store or the engine: the outbox calls this crate, not the other way round. The
//! AMQP URI and the key are never logged, displayed or carried in an error.

mod config;
mod confirm;
mod error;
mod link;
mod message;
pub mod metrics;
pub mod mqtt;
mod publish;

pub use config::{AmqpUri, PublisherConfig};
pub use error::{PublishError, Result};
pub use message::{request_id, CONTENT_TYPE, PERSISTENT, REQUEST_ID_HEADER, TENANT_HEADER};
pub use publish::Publisher;

//! Publishes the MQTT mirror's messages (lifecycle §5): QoS 1, retain off, a persistent session,
//! and a publish counts only when the broker's PUBACK for its packet id arrived.
//!
//! `rumqttc`'s `publish` returns when the request is queued, not when the broker has it, so the
//! [`MqttPublisher`] owns its event loop in one task (`driver`) and matches each PUBACK to the
//! publish it acknowledges: the loop reports every outgoing publish's packet id in the order the
//! requests were queued, which is the order this task queued them. Many publishes are in flight
//! at once, bounded.
//!
//! A lost connection fails every publish in flight (the outbox relay retries them, with their
//! frozen payloads and stable `eventId`s: at least once) and the driver reconnects with a capped
//! backoff, on a fresh event loop, so no half-remembered packet id is ever matched to another
//! publish. While it is away, publishes fail at once: the relay backs off, nothing waits.
//!
//! # Layout
//! - `config`: [`MqttConfig`] and the URL it parses ([`MqttUrl`]); the password is a secret.
//! - `error`: [`MqttError`].
//! - `driver`: the event loop task: connect, publish, match PUBACKs, reconnect.
//! - `pings`: the driver's PINGREQs: keep-alive, and the nudge that keeps a broker's Nagle
//!   delay off the last PUBACKs of a batch.
//! - `publish`: [`MqttPublisher`]: start, publish a batch, readiness, close.

mod config;
mod driver;
mod error;
mod pings;
mod publish;

pub use config::{MqttConfig, MqttUrl};
pub use error::MqttError;
pub use publish::{MqttMessage, MqttPublisher};

//! Getting recorded job events onto the broker: the relay that publishes leased outbox rows and
//! marks them, and the repairer that, every 30 s, leases whatever was never published and
//! relays it again (contract §8, at least once).
//!
//! # Layout
//! - [`relay`]: publish a batch of leased rows, mark the confirmed ones published and back
//!   off the others. Used by the Worker right after a commit, and by the repairer. (The MQTT
//!   mirror's rows are taken under row locks instead and deleted once delivered:
//!   `outbox::MirrorBatch`.)
//! - [`marks`]: [`Marks`], the published marks of several jobs' rows batched into one
//!   statement; [`relay_marked_later`] hands it a batch's confirmed rows (the Worker's publish
//!   right after a commit).
//! - [`repair`]: [`Repairer`], its config, its loop ([`Repairer::run`]) and its testable step
//!   ([`Repairer::repair_once`]).
//! - [`sink`]: [`SinkPublisher`], the AMQP or MQTT publisher of one outbox sink's rows; each
//!   sink is relayed and repaired on its own (its own [`Repairer`]), so one broker's outage
//!   never holds back the other's events.
//! - [`metrics`]: the counters both record; `ticks`: the timer of every relay's loop.
//! - [`manager`]: the Manager mode's relay ([`ManagerRelay`]) and repairer
//!   ([`ManagerRepairer`]) over lib-streaming's rows in the Manager's MongoDB, sorting outcomes
//!   as [`relay`] does.
//! - [`manager_mirror`]: the Manager mode's MQTT mirror relay ([`ManagerMirror`]) over this
//!   Worker's own `fetcher_worker_mirror` rows.
//!
//! Depends on `outbox`, `mongostate` (the Manager mode's rows) and `publisher` (plus `contract`
//! for types); knows nothing of jobs' extraction or storage.

pub mod manager;
pub mod manager_mirror;
pub mod marks;
pub mod metrics;
pub mod relay;
pub mod repair;
pub mod sink;
mod ticks;

pub use manager::{ManagerPassReport, ManagerRelay, ManagerRepairer, ManagerRepairerConfig};
pub use manager_mirror::{ManagerMirror, ManagerMirrorConfig, ManagerMirrorReport};
pub use marks::{Marks, MarksConfig, MarksStats};
pub use relay::{relay, relay_marked_later, RelayReport};
pub use repair::{PassReport, Repairer, RepairerConfig};
pub use sink::{Failure, SinkPublisher};

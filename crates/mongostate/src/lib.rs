//! The Worker's state in the Manager's MongoDB (issue 35; the facts, cited to upstream code, are
//! in docs/UPSTREAM-MANAGER.md, whose sections the comments here cite): the `job` documents the
//! Go Manager inserts, the `connection` documents it registers, and
//! lib-streaming's `streaming_outbox_events` rows, read and written exactly as the Go Worker
//! v2.0.x does, so that the Manager, Go Workers and Go relays see nothing new.
//!
//! It is a second implementation of the job core's ports, never a second set of rules: every
//! state change is asked of `contract::lifecycle`, as the PostgreSQL store (`outbox`) does, and
//! what this Worker knows beyond upstream (leases, executions, cancels, deletes) lives in a
//! sub-document of the job that Go code ignores.
//!
//! # Layout
//! - [`Store`] (`store.rs`): the client and the databases (`job` and `connection` in
//!   `lower(MONGO_NAME)`, the outbox in `MONGO_NAME` as given), and the `_id` encoding
//!   ([`binary_id`], BSON binary subtype 0x00).
//! - `connections`: the `connection` collection (§3): [`connections::find`] with the Go
//!   Worker's query, passwords opened with the credentials key, [`connections::resolve`] with
//!   upstream's precedence over the environment's datasources, and
//!   [`ManagerConnection::to_config`](connections::ManagerConnection::to_config) into the
//!   engine's `ConnectionConfig`.
//!
//! - [`ManagerStore`] (`manager_store.rs`): the job core's state port on these documents; each
//!   transition read, judged by `contract::lifecycle` and written with its outbox row in one
//!   transaction. Its methods are spread by what they hold: `claims.rs` (claim, lease,
//!   release, expired jobs), `terminal_record.rs` (a job's end), `unpublished.rs`
//!   (`recorded_event`, a redelivery's republish), `sweeps.rs` (objects left, deletions, executions' state),
//!   `marker_repair.rs` (the terminal-event repairer's markers, §5), `indexes.rs` (the
//!   outbox's indexes as lib-commons creates them, this Worker's own on `job`, the
//!   transactions check), `executions.rs` (a job's executions and their events),
//!   `control.rs` (the control API's cancels and deletes, a cancel's and a deletion's end:
//!   what the Manager is shown of them), `read_model.rs` (the job as the control API reads it).
//! - [`worker_outbox`]: this Worker's own outbox collection, `fetcher_worker_outbox`, for the
//!   events a Go relay would refuse (executions', cancels' and deletions').
//! - [`mirror`]: the MQTT mirror's rows, `fetcher_worker_mirror`, written with each event when
//!   the mirror is on ([`ManagerStore::mirrored`]); [`mirror_queue`]: taken, deleted once
//!   delivered, backed off, as the PostgreSQL mirror queue's.
//! - `slots`: the capped datasources' slots (`fetcher_worker_slots`, a collection of this
//!   Worker's own): [`ManagerStore::take_slot`], [`ManagerStore::renew_slot`],
//!   [`ManagerStore::release_slot`].
//! - [`outbox_event`]: a `streaming_outbox_events` row as the `outbox::PendingEvent` the
//!   publisher sends, and a new row leased to its publisher.
//!
//! # Dependencies
//!
//! `engine` for its connection types and errors only (a job fails on a Manager connection as
//! on a stored one), `crypto` for the credentials key; never the storage, broker or HTTP
//! crates, nor `worker`.

mod connection_source;
pub mod connections;
mod durability;
mod store;

pub use connection_source::ManagerConnections;
pub use durability::journaled_writes;

pub use store::{binary_id, Store, CONNECTION_COLLECTION, JOB_COLLECTION, OUTBOX_COLLECTION};

// The job document and lib-streaming's outbox rows, as the Go Worker writes them (§1.4, §4, §9):
// - `jobs`: a job read into [`jobs::JobDocument`] (with this Worker's `fetcher_worker`
//   sub-document) and the repairer's scan of marked terminal jobs.
// - `job_writes`: the move to processing (a CAS on `pending`), the one terminal `UpdateOne` with
//   its markers, and the marker's clearing.
// - `outbox`: a row written as lib-streaming writes it and read back as its reader reads it;
//   `outbox_envelope`: the version-1 envelope in its `payload`.
// - `outbox_claim`: the relay's conditional claims (§4.6) and state updates (§4.5);
//   `held_claims`: the claims a relay could not give back, for the repairer's next pass.
mod claims;
mod control;
mod error;
mod executions;
pub mod held_claims;
mod indexes;
pub mod job_writes;
pub mod jobs;
mod manager_store;
mod marker_repair;
pub mod mirror;
pub mod mirror_queue;
pub mod outbox;
pub mod outbox_claim;
mod outbox_envelope;
pub mod outbox_event;
mod read_model;
mod slots;
mod sweeps;
mod terminal_record;
mod unpublished;
pub mod worker_outbox;

pub use error::{Error, Result};
pub use manager_store::{to_outbox, ManagerConfig, ManagerStore};
pub use marker_repair::MarkerRepair;

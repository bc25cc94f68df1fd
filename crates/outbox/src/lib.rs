//! The Worker's state in PostgreSQL: job claims and terminal states (contract §5), and the
//! transactional outbox of terminal job events (contract §8).
//!
//! A job is claimed with a lease before it runs ([`Store::claim`]), so a message delivered twice
//! is extracted once and a lost Worker's job can be taken over. Its end is recorded with the
//! frozen event in one transaction ([`Store::record_terminal`]); the event is then published by
//! the Worker that recorded it and, if that did not happen, by a repairer that leases
//! unpublished rows ([`Store::claim_unpublished`]).
//!
//! # Layout
//! - [`Store`] (`store.rs`): the handle on the pool; [`Store::close`]; the few connections
//!   kept out of the pool between the job path's statements (the claim, the lease renewal, the
//!   claimed terminal record, the published mark), so none pays sqlx's test when a connection
//!   is given back ([`sqlpool::Kept`], half the pool at most).
//! - `jobs.rs`: [`Store::claim`], [`Store::renew_lease`], [`Store::hold_lease`],
//!   [`Store::expired_jobs`].
//! - `read_model.rs`: [`Store::job`] and [`Store::executions`], the job as the control API
//!   reads it.
//! - `listing.rs`: [`Store::list_jobs`] (a page of a tenant's jobs, by keyset) and
//!   [`Store::executions_of`].
//! - `terminal.rs`: [`Store::record_terminal`]: terminal state and outbox row together;
//!   [`Store::record_terminal_locked`], the locked-row transaction that answers every case.
//! - `terminal_claimed.rs`: [`Store::record_terminal_claimed`]: a claimed job's normal end as
//!   one statement, guarded on the state the lifecycle machine was asked about.
//! - `control.rs`: [`Store::control`] (cancel, delete) and [`Store::object_deleted`]: the
//!   lifecycle's state machine applied with its events' outbox rows in one transaction.
//! - `executions.rs`: [`Store::record_executions`]: a run's executions (lifecycle §1) with the
//!   events of their ends; queued by the claim, closed by the job's end, removed by its deletion.
//! - `mirror.rs`: the MQTT mirror's rows, recorded with the AMQP rows of a transaction when
//!   the mirror is on ([`Store::mirrored`]).
//! - [`MirrorBatch`] (`mirror_batch.rs`): the mirror's relay takes MQTT rows under row locks
//!   ([`Store::take_mirror_batch`]) and deletes them once acknowledged.
//! - [`Sink`] (`sink.rs`): where a row goes, AMQP or MQTT; each sink's rows are relayed apart.
//! - `outbox.rs`: leasing, marking and purging events ([`Store::claim_unpublished`],
//!   [`Store::claim_for_job`], [`Store::mark_published`], [`Store::mark_failed`],
//!   [`Store::purge_published`]).
//! - `stats.rs`: [`Store::stats`] and the outbox gauges.
//! - `transition_ages.rs`: [`Store::transition_ages`]: how long jobs have been canceling or
//!   deleting, and its gauge.
//! - `cancel_listener.rs`: [`Store::listen_for_cancels`], the LISTEN side of cancel
//!   announcements (`control.rs` sends them).
//! - `retention.rs`: [`Store::results_due`], [`Store::prune_ended_jobs`],
//!   [`Store::take_pass_lease`].
//! - `slots.rs`: [`Store::take_slot`], [`Store::renew_slot`], [`Store::release_slot`]: the
//!   leased slots of capped datasources (`DATASOURCE_<NAME>_MAX_CONCURRENT`).
//! - [`mod@backoff`]: when a failed publish is retried ([`backoff()`]).
//! - [`error`]: [`OutboxError`] and whether an error is retriable.
//!
//! The schema is the top-level `migrations/` directory, applied by the `schema` crate. This crate
//! must not depend on the broker (`lapin`), object storage (`aws-sdk-*`), `axum` or `engine`.

pub mod backoff;
mod cancel_listener;
mod control;
pub mod error;
mod executions;
mod jobs;
mod listing;
mod mirror;
mod mirror_batch;
mod objects_left;
mod outbox;
mod read_model;
mod retention;
mod sink;
mod slots;
mod stats;
mod store;
mod terminal;
mod terminal_claimed;
mod transition_ages;

pub use backoff::{backoff, Backoff};
pub use cancel_listener::{CancelListener, CANCEL_CHANNEL};
pub use control::{CancelEnded, ControlRequest, Controlled, EndCancel};
pub use error::{OutboxError, Result};
pub use executions::{status_details, Close, ExecutionEvents, ExecutionReport};
pub use jobs::{Claim, ClaimRequest, ExpiredJob, JobSpec, Lease, WORKER_LOST};
pub use listing::JobQuery;
pub use mirror_batch::{MirrorBatch, MirrorCursor, Unpublished};
pub use outbox::{PendingEvent, RecordedEvent, RowId};
pub use read_model::{ExecutionRow, JobRow};
pub use sink::Sink;
pub use slots::SlotHolder;
pub use stats::{OutboxStats, FAILING_EVENTS, OLDEST_UNPUBLISHED_AGE_SECONDS, PENDING_EVENTS};
pub use store::Store;
pub use terminal::{Recorded, TerminalOutcome, TerminalRecord};
pub use transition_ages::{TransitionAges, OLDEST_IN_TRANSITION_AGE_SECONDS};

/// Help text of the outbox's gauges, for the recorder the binary installs.
pub fn describe_metrics() {
    stats::describe();
    transition_ages::describe();
}

//! The job core: a job message to its one terminal outcome (verify, parse, claim, extract,
//! seal, store, record, publish). It knows no transport and no server: it reads an
//! [`Inbound`], talks to the traits of [`ports`], and answers a [`Disposition`].
//!
//! - `deliver.rs`: the order of a delivery's steps, top-down: admit → claim and run → end →
//!   after the commit. `core.rs`: [`JobCore`], what the steps share; [`JobSettings`].
//! - `inbound.rs`: a delivery as the core sees it.
//! - [`ports`]: the job store, result store, event sink and extractor it runs on.
//! - `authenticate.rs`: the signature, and the stale redelivery of an accepted job.
//! - `rejects.rs`: deliveries refused (dead-lettered) or failed unrun.
//! - `claim.rs`: taking the job, waiting on a busy one, republishing a finished one.
//! - `cancel.rs`: ending a cancel (a job canceled before it ran, a run that stopped) and what
//!   follows its commit.
//! - `run.rs`: a claimed run and its heartbeat; `produce.rs`: extract, seal, store;
//!   `claimed.rs`: what a claim gives the run.
//! - `deletion.rs`: a delete's second phase (the object, then `deleted`), retried by the sweeper.
//! - `finish.rs`: the one way every path ends a job: record with its event, publish, clean up.
//! - `after_commit.rs`: the one step after any committed lifecycle transition: say it, publish
//!   its events, discard or delete the object as the machine said.
//! - `events.rs`: the terminal events of each outcome.
//! - `executions.rs`: a run's executions, noted as the engine reports them and written as they
//!   change.
//! - `slots.rs`: a run's admission to its capped datasources: a slot of each, taken (waiting,
//!   queued, while none is free), renewed and freed through [`ports::SlotStore`].
//! - `spans.rs`: the stage spans of the traces.
//! - `wakeups.rs`: the runs a cancel announcement wakes at once.
//! - `sweeper.rs`: failing jobs whose Worker was lost and that no redelivery took over.
//!
//! Where "a cancel arrives while the result uploads" is decided: the run's terminal record
//! (`finish.rs` → [`ports::JobStore::record_terminal`]) asks the lifecycle machine under the
//! job's row lock; when the cancel wins, the store ends the cancel in that same transaction
//! (`Recorded::Canceled`) and the run discards its object (`after_commit.rs`).

mod after_commit;
mod authenticate;
mod cancel;
mod claim;
mod claimed;
mod core;
mod deletion;
mod deliver;
mod events;
mod executions;
mod finish;
mod inbound;
pub mod ports;
mod produce;
mod rejects;
mod run;
mod sealing;
mod slots;
mod spans;
mod sweeper;
#[cfg(test)]
mod tests;
mod wakeups;

pub use self::core::{Disposition, JobCore, JobSettings, MessageLimits, Requeue};
pub use after_commit::{after_commit, Committed};
pub use deletion::{finish_deletion, Deletion};
pub use inbound::{Inbound, InboundHeaders};
pub use ports::Ports;
pub use sweeper::Sweeper;

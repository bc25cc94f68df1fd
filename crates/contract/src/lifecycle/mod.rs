//! The job lifecycle of `docs/LIFECYCLE.md` (borrowed from AWS IoT Jobs): the statuses of a job
//! and of its per-datasource executions, and the one state machine every request and run
//! outcome goes through.
//!
//! - [`status`]: [`JobStatus`], [`ExecutionStatus`] and their wire names.
//! - [`details`]: [`JobProcessDetails`], the executions counted by status.
//! - [`request`]: [`parse_options`], the bodies of cancel and delete requests.
//! - [`machine`]: [`step`]: a state and a [`Step`] to a [`Transition`] (new state, the events
//!   recorded with it, what to do next) or a [`Refusal`].

pub mod details;
pub mod machine;
pub mod request;
pub mod status;

pub use details::JobProcessDetails;
pub use machine::{step, Event, JobState, Refusal, Step, Then, Transition};
pub use request::{parse_options, ControlOptions};
pub use status::{ExecutionStatus, JobStatus, UnknownStatus};

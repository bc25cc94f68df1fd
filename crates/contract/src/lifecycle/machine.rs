//! The job state machine (lifecycle §1, §3): what each request and each run outcome does to a
//! job in each state, which events it records (in commit order), and what the caller must do
//! next. One pure function, [`step`]; the state database applies its answer in one transaction.

use super::status::JobStatus;

/// A job as the lifecycle sees it: its status and what requests left to finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JobState {
    pub status: JobStatus,
    /// A cancel came for a job whose message was not seen yet: its message is acked unrun.
    pub cancel_requested: bool,
    /// The cancel stops running statements on the source servers.
    pub force: bool,
    /// A forced delete waits for the cancel to end, then deletes.
    pub delete_requested: bool,
}

impl JobState {
    pub fn new(status: JobStatus) -> JobState {
        JobState {
            status,
            cancel_requested: false,
            force: false,
            delete_requested: false,
        }
    }

    fn with(self, status: JobStatus) -> JobState {
        JobState { status, ..self }
    }
}

/// What happens to a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// `POST /v1/fetcher/{id}/cancel`.
    Cancel { force: bool },
    /// `DELETE /v1/fetcher/{id}`.
    Delete { force: bool },
    /// A delivery of the job message would run it (an earlier owner's lease, if any, lapsed).
    Claim,
    /// The run stored its result.
    Completed,
    /// The run failed, or a delivery that cannot run fails the job.
    Failed,
    /// The cancelled run stopped without a result (its statements ended or were killed).
    Stopped,
    /// The stored object is gone (or never existed).
    ObjectDeleted,
}

/// The job-level events of lifecycle §4 (the executions' events are their own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    CancellationInProgress,
    Canceled,
    Completed,
    Failed,
    DeletionInProgress,
    Deleted,
}

impl Event {
    /// The `ce-eventtype`, the last word of the routing key and of `ce-type`.
    pub fn operation(self) -> &'static str {
        match self {
            Event::CancellationInProgress => "cancellation_in_progress",
            Event::Canceled => "canceled",
            Event::Completed => "completed",
            Event::Failed => "failed",
            Event::DeletionInProgress => "deletion_in_progress",
            Event::Deleted => "deleted",
        }
    }

    /// One of the job's terminal events (exactly one per job).
    pub fn is_terminal(self) -> bool {
        matches!(self, Event::Canceled | Event::Completed | Event::Failed)
    }
}

/// What the caller does once the transition is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Then {
    Nothing,
    /// Run the job (this caller now holds it).
    Run,
    /// Tell the run's owner to stop: its queued datasources at once, its running statements
    /// too when `force`.
    StopStatements {
        force: bool,
    },
    /// Delete any object a run of the job stored; the job's status does not wait for it.
    DiscardObject,
    /// Delete the stored object, then [`Step::ObjectDeleted`] (retried until it succeeds).
    DeleteObject,
}

/// An accepted step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub to: JobState,
    /// Recorded with the new state, in this order.
    pub events: Vec<Event>,
    pub then: Then,
}

/// A refused step: nothing changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No such job (the API answers 404).
    #[error("no such job")]
    Unknown,
    /// Not from this status (the API answers 409; a run that meets it has lost its job).
    #[error("the job is {from}")]
    InvalidTransition { from: JobStatus },
}

/// What `step` does to a job in `state` (`None`: a job never seen).
pub fn step(state: Option<JobState>, step: Step) -> Result<Transition, Refusal> {
    use JobStatus as S;
    let Some(state) = state else {
        return unseen(step);
    };
    let refused = Err(Refusal::InvalidTransition { from: state.status });
    let to = |status, events: &[Event], then| {
        Ok(Transition {
            to: state.with(status),
            events: events.to_vec(),
            then,
        })
    };
    let unchanged = |to: JobState, then| {
        Ok(Transition {
            to,
            events: Vec::new(),
            then,
        })
    };
    match (state.status, step) {
        // A job not running yet is canceled at once; a forced delete cancels it first.
        (S::Pending, Step::Cancel { force }) if state.cancel_requested => unchanged(
            JobState {
                force: state.force || force,
                ..state
            },
            Then::Nothing,
        ),
        (S::Pending, Step::Cancel { .. }) => to(
            S::Canceled,
            &[Event::CancellationInProgress, Event::Canceled],
            Then::Nothing,
        ),
        (S::Pending, Step::Delete { force: true }) => to(
            S::DeletionInProgress,
            &[
                Event::CancellationInProgress,
                Event::Canceled,
                Event::DeletionInProgress,
            ],
            Then::DeleteObject,
        ),
        // Its message comes (or fails unrun) after the cancel: acked without a run.
        (S::Pending, Step::Claim | Step::Failed) if state.cancel_requested => to(
            S::Canceled,
            &[Event::CancellationInProgress, Event::Canceled],
            Then::Nothing,
        ),
        (S::Pending | S::Processing, Step::Claim) => to(S::Processing, &[], Then::Run),
        (S::Pending | S::Processing, Step::Failed) => {
            to(S::Failed, &[Event::Failed], Then::Nothing)
        }
        (S::Processing, Step::Completed) => to(S::Completed, &[Event::Completed], Then::Nothing),
        (S::Processing, Step::Cancel { force }) => Ok(Transition {
            to: JobState {
                status: S::CancellationInProgress,
                force,
                ..state
            },
            events: vec![Event::CancellationInProgress],
            then: Then::StopStatements { force },
        }),
        (S::Processing, Step::Delete { force: true }) => Ok(Transition {
            to: JobState {
                status: S::CancellationInProgress,
                force: true,
                delete_requested: true,
                ..state
            },
            events: vec![Event::CancellationInProgress],
            then: Then::StopStatements { force: true },
        }),
        // A cancel in progress: upgraded by `force`, ended by whatever ends the run.
        (S::CancellationInProgress, Step::Cancel { force }) => {
            let upgrade = force && !state.force;
            unchanged(
                JobState {
                    force: state.force || force,
                    ..state
                },
                if upgrade {
                    Then::StopStatements { force: true }
                } else {
                    Then::Nothing
                },
            )
        }
        (S::CancellationInProgress, Step::Delete { force: true }) => unchanged(
            JobState {
                force: true,
                delete_requested: true,
                ..state
            },
            Then::StopStatements { force: true },
        ),
        (
            S::CancellationInProgress,
            Step::Claim | Step::Completed | Step::Failed | Step::Stopped,
        ) => {
            if state.delete_requested {
                to(
                    S::DeletionInProgress,
                    &[Event::Canceled, Event::DeletionInProgress],
                    Then::DeleteObject,
                )
            } else {
                to(S::Canceled, &[Event::Canceled], Then::DiscardObject)
            }
        }
        (S::Canceled, Step::Cancel { .. }) => unchanged(state, Then::Nothing),
        (S::Completed | S::Failed | S::Canceled, Step::Delete { .. }) => to(
            S::DeletionInProgress,
            &[Event::DeletionInProgress],
            Then::DeleteObject,
        ),
        (S::DeletionInProgress, Step::Delete { .. }) => unchanged(state, Then::DeleteObject),
        (S::DeletionInProgress, Step::ObjectDeleted) => {
            to(S::Deleted, &[Event::Deleted], Then::Nothing)
        }
        (S::Deleted, Step::Delete { .. }) => unchanged(state, Then::Nothing),
        _ => refused,
    }
}

/// A job never seen: a cancel waits for its message; a delete has nothing to delete.
fn unseen(step: Step) -> Result<Transition, Refusal> {
    let state = |status| JobState::new(status);
    match step {
        Step::Cancel { force } => Ok(Transition {
            to: JobState {
                cancel_requested: true,
                force,
                ..state(JobStatus::Pending)
            },
            events: Vec::new(),
            then: Then::Nothing,
        }),
        Step::Claim => Ok(Transition {
            to: state(JobStatus::Processing),
            events: Vec::new(),
            then: Then::Run,
        }),
        Step::Failed => Ok(Transition {
            to: state(JobStatus::Failed),
            events: vec![Event::Failed],
            then: Then::Nothing,
        }),
        Step::Delete { .. } | Step::Completed | Step::Stopped | Step::ObjectDeleted => {
            Err(Refusal::Unknown)
        }
    }
}

#[cfg(test)]
mod tests;

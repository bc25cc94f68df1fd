//! What an event reports (its `ce-eventtype`): a job's terminal status (contract §8), a step of
//! its lifecycle, or the end of one of its executions (lifecycle §4).

use std::fmt;

use crate::lifecycle::{Event, ExecutionStatus};

use super::TerminalStatus;

/// The operation of an event, by its wire name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Completed,
    Failed,
    CancellationInProgress,
    Canceled,
    DeletionInProgress,
    Deleted,
    /// Execution operations (with [`Failed`](Self::Failed), [`Canceled`](Self::Canceled) and
    /// [`Deleted`](Self::Deleted)).
    Succeeded,
    Rejected,
    Removed,
    TimedOut,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Completed => "completed",
            Operation::Failed => "failed",
            Operation::CancellationInProgress => "cancellation_in_progress",
            Operation::Canceled => "canceled",
            Operation::DeletionInProgress => "deletion_in_progress",
            Operation::Deleted => "deleted",
            Operation::Succeeded => "succeeded",
            Operation::Rejected => "rejected",
            Operation::Removed => "removed",
            Operation::TimedOut => "timed_out",
        }
    }

    /// Whether a job-level event may report it.
    pub fn is_job_operation(self) -> bool {
        matches!(
            self,
            Operation::Completed
                | Operation::Failed
                | Operation::CancellationInProgress
                | Operation::Canceled
                | Operation::DeletionInProgress
                | Operation::Deleted
        )
    }

    /// Whether an execution event may report it.
    pub fn is_execution_operation(self) -> bool {
        matches!(
            self,
            Operation::Succeeded
                | Operation::Failed
                | Operation::Rejected
                | Operation::Removed
                | Operation::TimedOut
                | Operation::Canceled
                | Operation::Deleted
        )
    }

    /// `job.<op>`, or `job.execution.<op>` for an execution's event.
    pub fn routing_key(self, execution: bool) -> &'static str {
        self.names(execution).0
    }

    /// `studio.lerian.` and the routing key.
    pub fn ce_type(self, execution: bool) -> &'static str {
        self.names(execution).1
    }

    fn names(self, execution: bool) -> (&'static str, &'static str) {
        macro_rules! names {
            ($($op:ident => $name:literal;)*) => {
                match (self, execution) {
                    $(
                        (Operation::$op, false) => (
                            concat!("job.", $name),
                            concat!("studio.lerian.job.", $name),
                        ),
                        (Operation::$op, true) => (
                            concat!("job.execution.", $name),
                            concat!("studio.lerian.job.execution.", $name),
                        ),
                    )*
                }
            };
        }
        names! {
            Completed => "completed";
            Failed => "failed";
            CancellationInProgress => "cancellation_in_progress";
            Canceled => "canceled";
            DeletionInProgress => "deletion_in_progress";
            Deleted => "deleted";
            Succeeded => "succeeded";
            Rejected => "rejected";
            Removed => "removed";
            TimedOut => "timed_out";
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<TerminalStatus> for Operation {
    fn from(status: TerminalStatus) -> Operation {
        match status {
            TerminalStatus::Completed => Operation::Completed,
            TerminalStatus::Failed => Operation::Failed,
        }
    }
}

impl From<Event> for Operation {
    fn from(event: Event) -> Operation {
        match event {
            Event::CancellationInProgress => Operation::CancellationInProgress,
            Event::Canceled => Operation::Canceled,
            Event::Completed => Operation::Completed,
            Event::Failed => Operation::Failed,
            Event::DeletionInProgress => Operation::DeletionInProgress,
            Event::Deleted => Operation::Deleted,
        }
    }
}

impl Operation {
    /// The operation of an execution that ended `status`; `None` while it runs.
    pub fn of_execution(status: ExecutionStatus) -> Option<Operation> {
        Some(match status {
            ExecutionStatus::Queued | ExecutionStatus::InProgress => return None,
            ExecutionStatus::Succeeded => Operation::Succeeded,
            ExecutionStatus::Failed => Operation::Failed,
            ExecutionStatus::Rejected => Operation::Rejected,
            ExecutionStatus::Removed => Operation::Removed,
            ExecutionStatus::TimedOut => Operation::TimedOut,
            ExecutionStatus::Canceled => Operation::Canceled,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_agree_with_the_lifecycle_and_the_execution_statuses() {
        for event in [
            Event::CancellationInProgress,
            Event::Canceled,
            Event::Completed,
            Event::Failed,
            Event::DeletionInProgress,
            Event::Deleted,
        ] {
            let operation = Operation::from(event);
            assert_eq!(operation.as_str(), event.operation());
            assert!(operation.is_job_operation());
            assert_eq!(
                operation.routing_key(false),
                format!("job.{}", event.operation())
            );
        }
        for status in ExecutionStatus::ALL {
            let Some(operation) = Operation::of_execution(status) else {
                assert!(!status.is_terminal());
                continue;
            };
            assert_eq!(Some(operation.as_str()), status.operation());
            assert!(operation.is_execution_operation());
            assert_eq!(
                operation.routing_key(true),
                format!("job.execution.{}", operation.as_str())
            );
            assert_eq!(
                operation.ce_type(true),
                format!("studio.lerian.job.execution.{}", operation.as_str())
            );
        }
        let json = serde_json::to_string(&Operation::TimedOut).unwrap();
        assert_eq!(json, "\"timed_out\"");
    }
}

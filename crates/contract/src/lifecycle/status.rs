//! The statuses of a job and of its executions, by their wire names (lifecycle §1).

use std::fmt;
use std::str::FromStr;

/// A job's status, as the state database, the API and the events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Known, not started.
    Pending,
    /// Claimed and running.
    Processing,
    Completed,
    Failed,
    /// A cancel was accepted while the job ran; its queries are being stopped.
    CancellationInProgress,
    Canceled,
    /// A delete was accepted; the stored object is being removed.
    DeletionInProgress,
    /// Tombstone: the object is gone, the row stays.
    Deleted,
}

impl JobStatus {
    pub const ALL: [JobStatus; 8] = [
        JobStatus::Pending,
        JobStatus::Processing,
        JobStatus::Completed,
        JobStatus::Failed,
        JobStatus::CancellationInProgress,
        JobStatus::Canceled,
        JobStatus::DeletionInProgress,
        JobStatus::Deleted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Pending => "pending",
            JobStatus::Processing => "processing",
            JobStatus::Completed => "completed",
            JobStatus::Failed => "failed",
            JobStatus::CancellationInProgress => "cancellation_in_progress",
            JobStatus::Canceled => "canceled",
            JobStatus::DeletionInProgress => "deletion_in_progress",
            JobStatus::Deleted => "deleted",
        }
    }

    /// `completed`, `failed` or `canceled`: the job has its one terminal event.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Completed | JobStatus::Failed | JobStatus::Canceled
        )
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text names no job status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a job status: {0:?}")]
pub struct UnknownStatus(pub String);

impl FromStr for JobStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_owned()))
    }
}

/// One datasource's execution of a job (IoT `JobExecutionStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ExecutionStatus {
    Queued,
    InProgress,
    Succeeded,
    Failed,
    /// Refused before any query (unknown connection, unsupported type, schema validation).
    Rejected,
    /// Its connection exists only as a deleted row.
    Removed,
    TimedOut,
    /// Stopped because another datasource failed first, or the job was canceled.
    Canceled,
}

impl ExecutionStatus {
    pub const ALL: [ExecutionStatus; 8] = [
        ExecutionStatus::Queued,
        ExecutionStatus::InProgress,
        ExecutionStatus::Succeeded,
        ExecutionStatus::Failed,
        ExecutionStatus::Rejected,
        ExecutionStatus::Removed,
        ExecutionStatus::TimedOut,
        ExecutionStatus::Canceled,
    ];

    /// The upper-case wire name (`IN_PROGRESS`).
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionStatus::Queued => "QUEUED",
            ExecutionStatus::InProgress => "IN_PROGRESS",
            ExecutionStatus::Succeeded => "SUCCEEDED",
            ExecutionStatus::Failed => "FAILED",
            ExecutionStatus::Rejected => "REJECTED",
            ExecutionStatus::Removed => "REMOVED",
            ExecutionStatus::TimedOut => "TIMED_OUT",
            ExecutionStatus::Canceled => "CANCELED",
        }
    }

    /// The lower-case operation of its event (`job.execution.<op>`); `None` while not ended.
    pub fn operation(self) -> Option<&'static str> {
        Some(match self {
            ExecutionStatus::Queued | ExecutionStatus::InProgress => return None,
            ExecutionStatus::Succeeded => "succeeded",
            ExecutionStatus::Failed => "failed",
            ExecutionStatus::Rejected => "rejected",
            ExecutionStatus::Removed => "removed",
            ExecutionStatus::TimedOut => "timed_out",
            ExecutionStatus::Canceled => "canceled",
        })
    }

    pub fn is_terminal(self) -> bool {
        self.operation().is_some()
    }

    /// An execution that ends this way ends its job `failed` (lifecycle §1).
    pub fn fails_the_job(self) -> bool {
        matches!(
            self,
            ExecutionStatus::Failed
                | ExecutionStatus::Rejected
                | ExecutionStatus::Removed
                | ExecutionStatus::TimedOut
        )
    }
}

impl fmt::Display for ExecutionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ExecutionStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExecutionStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_reads_back_from_its_wire_name() {
        for status in JobStatus::ALL {
            assert_eq!(status.as_str().parse::<JobStatus>(), Ok(status));
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
        }
        for status in ExecutionStatus::ALL {
            assert_eq!(status.as_str().parse::<ExecutionStatus>(), Ok(status));
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
        }
        assert!("Pending".parse::<JobStatus>().is_err());
        assert!("queued".parse::<ExecutionStatus>().is_err());
    }

    #[test]
    fn three_statuses_are_terminal_and_four_execution_ends_fail_the_job() {
        let terminal: Vec<_> = JobStatus::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [JobStatus::Completed, JobStatus::Failed, JobStatus::Canceled]
        );
        let failing: Vec<_> = ExecutionStatus::ALL
            .into_iter()
            .filter(|s| s.fails_the_job())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(failing, ["FAILED", "REJECTED", "REMOVED", "TIMED_OUT"]);
        assert_eq!(ExecutionStatus::TimedOut.operation(), Some("timed_out"));
        assert_eq!(ExecutionStatus::Queued.operation(), None);
    }
}

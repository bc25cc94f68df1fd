//! Why an extraction failed, in words safe to store and publish.

use std::time::Duration;

use contract::lifecycle::ExecutionStatus;

/// An extraction failure. Display texts name connections, tables and fields, never hosts,
/// users or passwords; driver texts pass through [`contract::redact`] before they get here.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("connection not found for database: {0}")]
    UnknownConnection(String),
    /// The connection exists only as a deleted row (`connections.deleted_at` set); its text is
    /// an unknown connection's, as the job events always said.
    #[error("connection not found for database: {0}")]
    RemovedConnection(String),
    #[error("connection {connection}: {reason}")]
    InvalidConnection { connection: String, reason: String },
    #[error("connection {connection}: stored password uses key version {found}, this Worker has version {expected}")]
    KeyVersionMismatch {
        connection: String,
        found: String,
        expected: String,
    },
    #[error("connection {connection}: stored password cannot be decrypted with this Worker's key")]
    PasswordUnreadable { connection: String },
    /// `transient`: the failure may pass by itself ([`crate::transient`]); see
    /// [`EngineError::is_transient`].
    #[error("failed to connect to datasource {connection}: {detail}")]
    Connect {
        connection: String,
        detail: String,
        transient: bool,
    },
    #[error("datasource {connection} failed schema validation: {detail}")]
    Schema { connection: String, detail: String },
    #[error("job exceeds the limit of {limit} {what}")]
    LimitExceeded { what: &'static str, limit: usize },
    #[error("filter {detail}")]
    Filter { detail: String },
    /// `transient` as for [`EngineError::Connect`].
    #[error("query on datasource {connection} failed: {detail}")]
    Query {
        connection: String,
        detail: String,
        transient: bool,
    },
    #[error("result exceeds ENGINE_MAX_RESULT_BYTES ({limit} bytes)")]
    ResultTooLarge { limit: u64 },
    #[error("extraction timed out after {}s", .0.as_secs())]
    Timeout(Duration),
    /// A graceful stop ended the extraction once its running datasources finished.
    #[error("extraction canceled")]
    Canceled,
    /// The result's consumer stopped taking chunks (it failed, or the job ended otherwise): the
    /// extraction ends with it, and its caller reports the consumer's own error.
    #[error("extraction abandoned: the result's consumer stopped")]
    Abandoned,
    /// Spooling a part of the result to a temporary file in `ENGINE_SPILL_DIR` failed (the
    /// directory is gone, read-only or full). The directory's path is no secret: an operator
    /// reads it to find the disk to fix.
    #[error("the spill directory ENGINE_SPILL_DIR ({}) could not be written: {detail}", .dir.display())]
    Spill {
        dir: std::path::PathBuf,
        detail: String,
    },
    #[error("connection store unavailable: {0}")]
    Store(String),
    #[error("failed to write the result: {0}")]
    Result(String),
}

impl EngineError {
    /// Whether running the same job again later may succeed without anyone changing anything
    /// (an unreachable connection store). A datasource that is down fails the job: the caller
    /// asked for data as of now, and fail-fast is the contract. A spill that failed (a full,
    /// read-only or missing `ENGINE_SPILL_DIR`) is this Worker's own disk, not a dependency that
    /// comes back by itself: running the job again would only read the customer's database again
    /// and fail the same way, so the job fails.
    pub fn is_retriable(&self) -> bool {
        matches!(self, EngineError::Store(_))
    }

    /// Whether the same datasource, read again at once, may succeed: its source said the failure
    /// may pass by itself (a connection refused or reset, the server restarting, a deadlock, a
    /// serialization failure, a lock wait that timed out), as each driver classifies it
    /// ([`crate::transient`]). Everything else is permanent (a missing table, a permission, a
    /// bad filter, the job's own timeout, a cancel, a result too large) and never retried. This
    /// decides retries of one datasource within a run (`JOB_RETRY_ATTEMPTS`); whether the whole
    /// job is sent back to its queue is [`EngineError::is_retriable`].
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            EngineError::Connect {
                transient: true,
                ..
            } | EngineError::Query {
                transient: true,
                ..
            }
        )
    }

    /// The status of the execution that ended with this error (lifecycle §1): refused before
    /// any query (`REJECTED`), a deleted connection (`REMOVED`), the job's timeout
    /// (`TIMED_OUT`), a graceful stop (`CANCELED`), else `FAILED`.
    pub fn execution_status(&self) -> ExecutionStatus {
        match self {
            EngineError::UnknownConnection(_)
            | EngineError::InvalidConnection { .. }
            | EngineError::Schema { .. }
            | EngineError::LimitExceeded { .. }
            | EngineError::Filter { .. } => ExecutionStatus::Rejected,
            EngineError::RemovedConnection(_) => ExecutionStatus::Removed,
            EngineError::Timeout(_) => ExecutionStatus::TimedOut,
            EngineError::Canceled => ExecutionStatus::Canceled,
            EngineError::KeyVersionMismatch { .. }
            | EngineError::PasswordUnreadable { .. }
            | EngineError::Connect { .. }
            | EngineError::Query { .. }
            | EngineError::ResultTooLarge { .. }
            | EngineError::Store(_)
            | EngineError::Abandoned
            | EngineError::Spill { .. }
            | EngineError::Result(_) => ExecutionStatus::Failed,
        }
    }

    pub(crate) fn connect(connection: &str, error: &sqlx::Error) -> EngineError {
        EngineError::Connect {
            connection: connection.to_owned(),
            detail: contract::redact(&error.to_string()),
            transient: crate::transient::sqlx(error),
        }
    }

    pub(crate) fn query(connection: &str, error: &sqlx::Error) -> EngineError {
        EngineError::Query {
            connection: connection.to_owned(),
            detail: contract::redact(&error.to_string()),
            transient: crate::transient::sqlx(error),
        }
    }

    /// A permanent query failure of the engine's own making (a value it cannot write).
    pub(crate) fn query_detail(connection: &str, detail: String) -> EngineError {
        EngineError::Query {
            connection: connection.to_owned(),
            detail,
            transient: false,
        }
    }
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;

//! Why a state-database operation failed, and whether trying again later may succeed.

/// A failed operation on the state database. Texts name the step that failed and carry the
/// driver's text through [`contract::redact`]: never a connection string, host or user.
#[derive(Debug, thiserror::Error)]
pub enum OutboxError {
    /// The database could not be reached or did not answer in time (connection refused or lost,
    /// pool timeout, server shutting down, statement timeout, serialization failure or
    /// deadlock). The same operation may succeed later.
    #[error("{step}: state database unavailable: {detail}")]
    Unavailable { step: &'static str, detail: String },
    /// The database refused the write: a constraint (unique, foreign key, check, not null).
    #[error("{step}: state database refused the write (constraint {constraint}): {detail}")]
    Constraint {
        step: &'static str,
        constraint: String,
        detail: String,
    },
    /// Any other error the server returned (a schema that is not migrated, a permission).
    #[error("{step}: state database error: {detail}")]
    Database { step: &'static str, detail: String },
    /// A stored row could not be read back into its type.
    #[error("{step}: stored row is unreadable: {detail}")]
    Corrupt { step: &'static str, detail: String },
    /// The caller passed something the store cannot write (a count over `i64::MAX`, an event of
    /// another job or status, a batch size under 1).
    #[error("{step}: {detail}")]
    InvalidArgument { step: &'static str, detail: String },
}

impl OutboxError {
    /// Whether the same operation may succeed later without anyone changing anything: the
    /// database was unreachable, timed out or asked for a retry. Constraint violations, corrupt
    /// rows and invalid arguments are not retriable.
    pub fn is_retriable(&self) -> bool {
        matches!(self, OutboxError::Unavailable { .. })
    }

    /// Classifies a driver error met while doing `step`.
    pub(crate) fn sqlx(step: &'static str, error: sqlx::Error) -> OutboxError {
        let detail = contract::redact(&error.to_string());
        match &error {
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
            | sqlx::Error::BeginFailed => OutboxError::Unavailable { step, detail },
            sqlx::Error::Database(db) => {
                let code = db.code().map(|c| c.into_owned()).unwrap_or_default();
                if retriable_sqlstate(&code) {
                    OutboxError::Unavailable { step, detail }
                } else if code.starts_with("23") {
                    OutboxError::Constraint {
                        step,
                        constraint: db.constraint().unwrap_or("unnamed").to_owned(),
                        detail,
                    }
                } else {
                    OutboxError::Database { step, detail }
                }
            }
            sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::Decode(_)
            | sqlx::Error::ColumnNotFound(_)
            | sqlx::Error::ColumnIndexOutOfBounds { .. }
            | sqlx::Error::TypeNotFound { .. } => OutboxError::Corrupt { step, detail },
            _ => OutboxError::Database { step, detail },
        }
    }

    pub(crate) fn invalid(step: &'static str, detail: impl Into<String>) -> OutboxError {
        OutboxError::InvalidArgument {
            step,
            detail: detail.into(),
        }
    }
}

/// SQLSTATEs after which the same statement may succeed later.
fn retriable_sqlstate(code: &str) -> bool {
    // 08: connection exception; 53: insufficient resources (too many connections, disk full).
    code.starts_with("08")
        || code.starts_with("53")
        || matches!(
            code,
            // serialization_failure, deadlock_detected
            "40001" | "40P01"
            // query_canceled (statement_timeout), admin_shutdown, crash_shutdown,
            // cannot_connect_now
            | "57014" | "57P01" | "57P02" | "57P03"
            // lock_not_available (lock_timeout)
            | "55P03"
        )
}

pub type Result<T, E = OutboxError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_database_is_retriable() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(OutboxError::sqlx("claiming a job", sqlx::Error::Io(io)).is_retriable());
        assert!(OutboxError::sqlx("claiming a job", sqlx::Error::PoolTimedOut).is_retriable());
    }

    #[test]
    fn decode_failures_and_arguments_are_not_retriable() {
        let decode = sqlx::Error::Decode("bad".into());
        assert!(!OutboxError::sqlx("reading a job", decode).is_retriable());
        assert!(!OutboxError::invalid("recording", "bad").is_retriable());
    }

    #[test]
    fn connection_and_timeout_states_are_retriable_constraints_are_not() {
        for code in [
            "08006", "08001", "53300", "40001", "40P01", "57014", "57P01", "55P03",
        ] {
            assert!(retriable_sqlstate(code), "{code}");
        }
        for code in ["23505", "23503", "23514", "42P01", "22P02"] {
            assert!(!retriable_sqlstate(code), "{code}");
        }
    }

    #[test]
    fn texts_never_carry_an_address() {
        let io = std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "connect to postgres://fetcher:s3cret@10.0.0.5:5432/state failed",
        );
        let text = OutboxError::sqlx("claiming a job", sqlx::Error::Io(io)).to_string();
        assert!(!text.contains("s3cret"), "{text}");
        assert!(!text.contains("10.0.0.5"), "{text}");
        assert!(
            text.starts_with("claiming a job: state database unavailable"),
            "{text}"
        );
    }
}

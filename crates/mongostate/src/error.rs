//! What a job or outbox write on the Manager's MongoDB can fail with, and whether to retry.

use uuid::Uuid;

/// The errors of the job and outbox functions. None carries a payload, a document or a
/// driver text that was not redacted.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server could not be reached or refused the operation (redacted driver text).
    #[error("the Manager's MongoDB is unavailable: {0}")]
    Unavailable(String),
    /// No job has this `_id` (the Manager creates every job; this Worker never inserts one).
    #[error("job {0} not found")]
    JobNotFound(Uuid),
    /// The job document is one Go could not decode either (the Manager's `GET` answers 500).
    #[error("job {id} cannot be read: {reason}")]
    UndecodableJob { id: Uuid, reason: String },
    /// A value this Worker was asked to write would break a Go reader (a metadata key with `.`
    /// or `$`, an event payload that is not JSON, a tenant lib-commons refuses).
    #[error("refused to write {what}: {reason}")]
    InvalidWrite { what: &'static str, reason: String },
    /// An outbox row that lib-streaming's reader would refuse.
    #[error("outbox row {id} cannot be read: {reason}")]
    UndecodableRow { id: String, reason: String },
    /// An outbox row's payload that is not a version-1 envelope a relay may publish.
    #[error("outbox row {id} holds no publishable envelope: {reason}")]
    InvalidEnvelope { id: String, reason: String },
}

impl Error {
    /// Only an unavailable server is worth the same call again; every other error stays.
    pub fn is_retriable(&self) -> bool {
        matches!(self, Error::Unavailable(_))
    }

    pub(crate) fn unavailable(error: &mongodb::error::Error) -> Error {
        Error::Unavailable(contract::redact(&error.to_string()))
    }
}

pub type Result<T> = std::result::Result<T, Error>;

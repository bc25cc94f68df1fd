//! Storage errors, named after the step that failed, with texts safe to log and publish.

use std::fmt;

/// Result of a storage operation.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// A failed storage step.
///
/// Every text is redacted: it never contains the credentials, the endpoint URL or its host, nor
/// any network address (see [`contract::redact`]). Object keys and the bucket name do appear:
/// they are not secrets, and an operator needs them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The storage settings are unusable; every problem is listed.
    #[error("Invalid object storage settings: {}", problems.join("; "))]
    InvalidConfig { problems: Vec<String> },

    /// The object key cannot be built, e.g. a tenant id that would leave its folder.
    #[error("Invalid object key: {reason}")]
    InvalidKey { reason: String },

    /// The object needs more parts than S3 allows in one multipart upload.
    #[error("Object {key} is too large to store: {text_bytes} bytes need {parts} parts, S3 allows at most {max_parts}")]
    ObjectTooLarge {
        key: String,
        text_bytes: u64,
        parts: u64,
        max_parts: u64,
    },

    #[error("Failed to put object {key}: {cause}")]
    Put { key: String, cause: Cause },

    #[error("Failed to start the multipart upload of object {key}: {cause}")]
    CreateMultipart { key: String, cause: Cause },

    #[error("Failed to upload part {part_number} of object {key}: {cause}")]
    UploadPart {
        key: String,
        part_number: i32,
        cause: Cause,
    },

    #[error("Failed to complete the multipart upload of object {key}: {cause}")]
    CompleteMultipart { key: String, cause: Cause },

    /// The caller's check right before publishing a streamed upload failed: the object was not
    /// stored and its parts were aborted. `reason` is the caller's text.
    #[error("Object {key} was not published: {reason}")]
    Refused { key: String, reason: String },

    /// A streamed upload was used again after one of its steps had failed (and aborted it).
    #[error("The upload of object {key} already failed and was aborted")]
    UploadAborted { key: String },

    /// A streamed upload was written to or finished while its part was lent out
    /// ([`Upload::lend`](crate::Upload::lend)) and not given back: a caller's mistake.
    #[error("The upload of object {key} was used while its part was lent out")]
    PartLent { key: String },

    /// `get` of a key that holds no object.
    #[error("Object {key} does not exist")]
    NotFound { key: String },

    #[error("Failed to get object {key}: {cause}")]
    Get { key: String, cause: Cause },

    /// A download whose body did not have the length the server announced.
    #[error(
        "Truncated download of object {key}: {received} bytes received of the {expected} announced"
    )]
    Truncated {
        key: String,
        expected: u64,
        received: u64,
    },

    #[error("Failed to delete object {key}: {cause}")]
    Delete { key: String, cause: Cause },

    #[error("Failed to check whether object {key} exists: {cause}")]
    HeadObject { key: String, cause: Cause },

    /// The configured bucket does not exist (readiness fails until it does).
    #[error("Object storage bucket {bucket} does not exist")]
    BucketNotFound { bucket: String },

    #[error("Failed to reach object storage bucket {bucket}: {cause}")]
    HeadBucket { bucket: String, cause: Cause },

    #[error("Failed to create object storage bucket {bucket}: {cause}")]
    CreateBucket { bucket: String, cause: Cause },
}

impl StorageError {
    /// Whether trying the same job again later may succeed: network failures, timeouts,
    /// throttling and server errors. Misconfiguration (bad settings or credentials, a missing
    /// bucket) and bad input are not retriable: the job fails instead of looping.
    ///
    /// The SDK has already retried each request (standard mode, 3 attempts) before this is asked.
    pub fn is_retriable(&self) -> bool {
        match self {
            StorageError::InvalidConfig { .. }
            | StorageError::InvalidKey { .. }
            | StorageError::ObjectTooLarge { .. }
            | StorageError::NotFound { .. }
            | StorageError::BucketNotFound { .. }
            | StorageError::Refused { .. }
            | StorageError::UploadAborted { .. }
            | StorageError::PartLent { .. } => false,
            // The connection ended early: another attempt may get the whole body.
            StorageError::Truncated { .. } => true,
            StorageError::Put { cause, .. }
            | StorageError::CreateMultipart { cause, .. }
            | StorageError::UploadPart { cause, .. }
            | StorageError::CompleteMultipart { cause, .. }
            | StorageError::Get { cause, .. }
            | StorageError::Delete { cause, .. }
            | StorageError::HeadObject { cause, .. }
            | StorageError::HeadBucket { cause, .. }
            | StorageError::CreateBucket { cause, .. } => cause.is_retriable(),
        }
    }
}

/// Why an S3 request failed: a redacted text and whether the failure is transient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub(crate) message: String,
    pub(crate) retriable: bool,
}

impl Cause {
    /// A cause from a text that is already redacted (the store builds its causes from the SDK's
    /// errors; other implementations of a result store, and tests, build their own).
    pub fn new(redacted_message: impl Into<String>, retriable: bool) -> Cause {
        Cause {
            message: redacted_message.into(),
            retriable,
        }
    }

    /// The redacted text.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn is_retriable(&self) -> bool {
        self.retriable
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_errors_list_every_problem() {
        let error = StorageError::InvalidConfig {
            problems: vec!["bucket is empty".into(), "part size too small".into()],
        };
        assert_eq!(
            error.to_string(),
            "Invalid object storage settings: bucket is empty; part size too small"
        );
        assert!(!error.is_retriable());
    }
}

//! Why an inbound job message was refused, with a stable code per reason.

/// A job message that cannot be processed. Every variant has a stable [`code`](Self::code) for
/// logs and metrics, and a message that says what is wrong without echoing the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    #[error("message body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("message body must be a JSON object, got {0}")]
    NotAnObject(&'static str),
    #[error("{path} must be {expected}, got {found}")]
    WrongType {
        path: String,
        expected: &'static str,
        found: &'static str,
    },
    #[error("jobId is required")]
    MissingJobId,
    #[error("jobId is not a valid UUID")]
    InvalidJobId,
    #[error("jobId must not be the nil UUID")]
    NilJobId,
    #[error("mappedFields is required and must name at least one connection")]
    MissingMappedFields,
    #[error("mappedFields.{connection} must name at least one table")]
    ConnectionWithoutTables { connection: String },
    #[error("mappedFields.{connection}.{table} must name at least one field")]
    TableWithoutFields { connection: String, table: String },
    #[error("{path} must not be empty")]
    EmptyName { path: String },
    #[error("{path}: unknown filter operator {operator:?}")]
    UnknownOperator { path: String, operator: String },
    #[error("{path}: {reason}")]
    InvalidFilter { path: String, reason: &'static str },
    #[error(
        "message contains a NUL character (U+0000), which names, values and metadata cannot hold"
    )]
    NulCharacter,
    #[error("metadata is {bytes} bytes as JSON, more than the {limit} bytes an event may carry")]
    MetadataTooLarge { bytes: u64, limit: u64 },
    #[error("timeoutSeconds must be an integer from 1 to 86400")]
    InvalidTimeout,
    #[error("message holds {values} JSON values, more than the {limit} a job message may hold")]
    TooManyValues { values: u64, limit: u64 },
}

impl MessageError {
    /// A short identifier that never changes for a given reason: safe to match on, to count
    /// in metrics and to search logs for.
    pub fn code(&self) -> &'static str {
        match self {
            MessageError::InvalidJson(_) => "invalid_json",
            MessageError::NotAnObject(_) => "not_an_object",
            MessageError::WrongType { .. } => "wrong_type",
            MessageError::MissingJobId => "missing_job_id",
            MessageError::InvalidJobId => "invalid_job_id",
            MessageError::NilJobId => "nil_job_id",
            MessageError::MissingMappedFields => "missing_mapped_fields",
            MessageError::ConnectionWithoutTables { .. } => "connection_without_tables",
            MessageError::TableWithoutFields { .. } => "table_without_fields",
            MessageError::EmptyName { .. } => "empty_name",
            MessageError::UnknownOperator { .. } => "unknown_filter_operator",
            MessageError::InvalidFilter { .. } => "invalid_filter",
            MessageError::NulCharacter => "nul_character",
            MessageError::MetadataTooLarge { .. } => "metadata_too_large",
            MessageError::TooManyValues { .. } => "too_many_values",
            MessageError::InvalidTimeout => "invalid_timeout",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_type_message_names_the_member_and_both_types() {
        let e = MessageError::WrongType {
            path: "jobId".into(),
            expected: "a string",
            found: "number",
        };
        assert_eq!(e.to_string(), "jobId must be a string, got number");
        assert_eq!(e.code(), "wrong_type");
    }
}

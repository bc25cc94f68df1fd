//! Errors of the JSON writer: the sink failed, a value Go refuses to encode, or API misuse.

use std::io;

/// Why a JSON document could not be written.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// The underlying `std::io::Write` failed; the output written so far is incomplete.
    #[error("writing JSON output failed")]
    Io(#[from] io::Error),
    /// NaN or an infinity: Go's `encoding/json` refuses these (`UnsupportedValueError`).
    #[error("json: unsupported value: {0}")]
    NonFiniteFloat(f64),
    /// The calls did not describe one well-formed value (a value where a key was expected, an
    /// `end_*` without its `begin_*`, a second top-level value, finishing an open document...).
    /// Nothing is written by the call that returns this error.
    #[error("JSON writer misuse: {0}")]
    Misuse(&'static str),
}

impl JsonError {
    /// True when the error comes from the caller's sequence of calls rather than from the data
    /// or the sink: a bug in the caller, not a condition to retry or report to a user.
    pub fn is_misuse(&self) -> bool {
        matches!(self, JsonError::Misuse(_))
    }
}

/// Result of the JSON writer's operations.
pub type Result<T> = std::result::Result<T, JsonError>;

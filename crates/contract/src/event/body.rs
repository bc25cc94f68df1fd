//! The body of a terminal job event (contract §8): compact Go-style JSON, members in order.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::json::{GoTime, JsonError, JsonWriter, Style};
use crate::redaction::Redacted;

use super::TerminalStatus;

/// What a completed job stored.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredResult {
    /// The object key without `OBJECT_STORAGE_KEY_PREFIX`.
    pub path: String,
    /// Length of the plaintext result JSON.
    pub size_bytes: u64,
    /// Rows over all tables.
    pub row_count: u64,
    /// Lowercase hex HMAC-SHA256 of the plaintext under the external key.
    pub hmac: String,
}

/// How a job ended, with what its event reports.
#[derive(Debug, Clone, Copy)]
pub enum Outcome<'a> {
    Completed {
        result: &'a StoredResult,
        execution_time_ms: u64,
        completed_at: DateTime<Utc>,
    },
    Failed {
        error: &'a Redacted,
    },
}

impl Outcome<'_> {
    pub fn status(&self) -> TerminalStatus {
        match self {
            Outcome::Completed { .. } => TerminalStatus::Completed,
            Outcome::Failed { .. } => TerminalStatus::Failed,
        }
    }
}

/// The event body bytes. `metadata` is the job message's metadata; for a failure its `error`
/// member is replaced by `{"message": <redacted error>}`. Zero sizes, counts and durations are
/// omitted, as Go's `omitempty` does.
pub fn event_body(
    job_id: Uuid,
    metadata: &Map<String, Value>,
    outcome: &Outcome<'_>,
) -> Result<Vec<u8>, JsonError> {
    let mut w = JsonWriter::new(Vec::with_capacity(512), Style::Compact);
    w.begin_object()?;
    w.key("jobId")?;
    w.string(&job_id.as_hyphenated().to_string())?;
    w.key("metadata")?;
    let mut metadata = metadata.clone();
    if let Outcome::Failed { error } = outcome {
        let mut message = Map::new();
        message.insert("message".into(), Value::String(error.as_str().to_owned()));
        metadata.insert("error".into(), Value::Object(message));
    }
    w.value(&Value::Object(metadata))?;
    w.key("status")?;
    w.string(outcome.status().as_str())?;
    if let Outcome::Completed {
        result,
        execution_time_ms,
        completed_at,
    } = outcome
    {
        w.key("result")?;
        write_result(&mut w, result)?;
        if *execution_time_ms != 0 {
            w.key("executionTimeMs")?;
            w.u64(*execution_time_ms)?;
        }
        w.key("completedAt")?;
        w.string(GoTime::from(*completed_at).as_str())?;
    }
    w.end_object()?;
    w.finish()
}

fn write_result(w: &mut JsonWriter<Vec<u8>>, result: &StoredResult) -> Result<(), JsonError> {
    w.begin_object()?;
    w.key("path")?;
    w.string(&result.path)?;
    if result.size_bytes != 0 {
        w.key("sizeBytes")?;
        w.u64(result.size_bytes)?;
    }
    if result.row_count != 0 {
        w.key("rowCount")?;
        w.u64(result.row_count)?;
    }
    w.key("format")?;
    w.string("json")?;
    w.key("hmac")?;
    w.string(&result.hmac)?;
    w.key("integrity")?;
    w.begin_object()?;
    w.key("algorithm")?;
    w.string("HMAC-SHA256")?;
    w.key("signature")?;
    w.string(&result.hmac)?;
    w.end_object()?;
    w.key("protection")?;
    w.begin_object()?;
    w.key("encrypted")?;
    w.bool(true)?;
    w.key("mode")?;
    w.string("adapter-managed")?;
    w.key("appliedBy")?;
    w.string("adapter")?;
    w.end_object()?;
    w.end_object()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn metadata(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => panic!("metadata must be an object"),
        }
    }

    #[test]
    fn completed_body_matches_the_contract_example() {
        let job = Uuid::parse_str("6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88").expect("uuid");
        let result = StoredResult {
            path: format!("external-data/{job}.json"),
            size_bytes: 184_320,
            row_count: 1204,
            hmac: "9f1c".into(),
        };
        let completed_at = Utc
            .timestamp_millis_opt(1_783_965_851_204)
            .single()
            .expect("time");
        let outcome = Outcome::Completed {
            result: &result,
            execution_time_ms: 8421,
            completed_at,
        };
        let meta = metadata(json!({"source":"payments","correlationId":"settlement-2026-07-13"}));
        let body = event_body(job, &meta, &outcome).expect("body");
        let expected = r#"{"jobId":"6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88","metadata":{"correlationId":"settlement-2026-07-13","source":"payments"},"status":"completed","result":{"path":"external-data/6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88.json","sizeBytes":184320,"rowCount":1204,"format":"json","hmac":"9f1c","integrity":{"algorithm":"HMAC-SHA256","signature":"9f1c"},"protection":{"encrypted":true,"mode":"adapter-managed","appliedBy":"adapter"}},"executionTimeMs":8421,"completedAt":"2026-07-13T18:04:11.204Z"}"#;
        assert_eq!(String::from_utf8(body).expect("utf-8"), expected);
    }

    #[test]
    fn zero_counts_and_duration_are_omitted() {
        let job = Uuid::parse_str("6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88").expect("uuid");
        let result = StoredResult {
            path: "p".into(),
            size_bytes: 0,
            row_count: 0,
            hmac: "h".into(),
        };
        let outcome = Outcome::Completed {
            result: &result,
            execution_time_ms: 0,
            completed_at: Utc.timestamp_millis_opt(0).single().expect("time"),
        };
        let body = String::from_utf8(event_body(job, &Map::new(), &outcome).expect("body"))
            .expect("utf-8");
        assert!(!body.contains("sizeBytes"), "{body}");
        assert!(!body.contains("rowCount"), "{body}");
        assert!(!body.contains("executionTimeMs"), "{body}");
        assert!(body.contains(r#""metadata":{}"#), "{body}");
        assert!(
            body.ends_with(r#""completedAt":"1970-01-01T00:00:00Z"}"#),
            "{body}"
        );
    }

    #[test]
    fn failed_body_overrides_the_callers_error_and_keeps_the_rest() {
        let job = Uuid::parse_str("8f2c1a9e-4b30-4c02-9a1b-2d5e6f7a1c33").expect("uuid");
        let meta = metadata(json!({"source":"payments","error":"caller's own"}));
        let error = Redacted::new("failed to connect to datasource");
        let body = event_body(job, &meta, &Outcome::Failed { error: &error }).expect("body");
        let expected = r#"{"jobId":"8f2c1a9e-4b30-4c02-9a1b-2d5e6f7a1c33","metadata":{"error":{"message":"failed to connect to datasource"},"source":"payments"},"status":"failed"}"#;
        assert_eq!(String::from_utf8(body).expect("utf-8"), expected);
    }

    #[test]
    fn failed_body_never_carries_an_address() {
        let job = Uuid::parse_str("8f2c1a9e-4b30-4c02-9a1b-2d5e6f7a1c33").expect("uuid");
        let error = Redacted::new("dial tcp 10.0.0.5:5432: connection refused");
        let body = event_body(job, &Map::new(), &Outcome::Failed { error: &error }).expect("body");
        let text = String::from_utf8(body).expect("utf-8");
        assert!(!text.contains("10.0.0.5"), "{text}");
        assert!(text.contains("dial tcp [redacted]"), "{text}");
    }
}

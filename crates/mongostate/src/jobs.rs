//! A job document as the Go Worker reads it (UPSTREAM-MANAGER §1.2, §1.4 steps 1-2), and the
//! terminal-event repairer's scan (§5).
//!
//! Upstream's gaps and what is chosen here:
//! - Go decodes the whole document into one struct and fails on any field of the wrong type;
//!   [`read`] fails on the same fields (`status`, `_id`, `metadata`, `dedup_active`, the result
//!   fields, the dates) and skips the rest, as Go's decoder does.
//! - What this Worker keeps beyond upstream (lease, executions, cancel and delete state) lives in
//!   the top-level sub-document [`WORKER_FIELD`], which Go's decoder skips and Go's `$set`s never
//!   touch; [`JobDocument::fetcher_worker`] returns it untouched.
//! - A marker Go's repairer would refuse (status or payload missing, or a status other than the
//!   job's) is reported as [`Marker::Unusable`] with the reason and left in place, as Go leaves it.

use chrono::{DateTime, Utc};
use contract::event::TerminalStatus;
use mongodb::bson::{self, doc, spec::BinarySubtype, Bson, Document};
use uuid::Uuid;

use crate::{binary_id, Error, Result, Store};

/// The top-level sub-document holding every field only this Worker reads.
pub const WORKER_FIELD: &str = "fetcher_worker";

/// The marker keys under `metadata` (§1.4 step 5), set with a terminal status and cleared once
/// the event's outbox row is written.
pub const MARKER_PENDING: &str = "terminalEventPending";
pub const MARKER_STATUS: &str = "terminalEventStatus";
pub const MARKER_PAYLOAD: &str = "terminalEventPayload";

/// How many marked jobs one repairer pass takes (`terminal_event_repairer.go:22-25`).
pub const REPAIR_BATCH: i64 = 25;

/// The statuses Go accepts (`fetcher:pkg/model/job.go:37-63`); any other string makes the
/// document unreadable to the Manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ManagerStatus {
    Pending,
    Processing,
    Completed,
    Failed,
}

impl ManagerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ManagerStatus::Pending => "pending",
            ManagerStatus::Processing => "processing",
            ManagerStatus::Completed => "completed",
            ManagerStatus::Failed => "failed",
        }
    }

    /// Read as Go reads it: trimmed and lower-cased first.
    pub fn parse(text: &str) -> Option<ManagerStatus> {
        match text.trim().to_lowercase().as_str() {
            "pending" => Some(ManagerStatus::Pending),
            "processing" => Some(ManagerStatus::Processing),
            "completed" => Some(ManagerStatus::Completed),
            "failed" => Some(ManagerStatus::Failed),
            _ => None,
        }
    }

    /// The terminal status, for `completed` and `failed`.
    pub fn terminal(self) -> Option<TerminalStatus> {
        match self {
            ManagerStatus::Completed => Some(TerminalStatus::Completed),
            ManagerStatus::Failed => Some(TerminalStatus::Failed),
            _ => None,
        }
    }
}

impl From<TerminalStatus> for ManagerStatus {
    fn from(status: TerminalStatus) -> ManagerStatus {
        match status {
            TerminalStatus::Completed => ManagerStatus::Completed,
            TerminalStatus::Failed => ManagerStatus::Failed,
        }
    }
}

/// A terminal event whose outbox row may not be written yet: what a repairer re-emits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEvent {
    pub status: TerminalStatus,
    /// The exact event body, re-emitted byte for byte.
    pub payload: String,
}

/// The job's `metadata.terminalEvent*` marker, as Go's type assertions read it
/// (`extract_data.go:442-459`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    /// `terminalEventPending` is not BSON `true`.
    None,
    /// Re-emit `PendingEvent`, then clear the marker.
    Pending(PendingEvent),
    /// `terminalEventPending` is `true` but Go's repairer would refuse it (why); it stays.
    Unusable(String),
}

/// A job document, typed as far as this Worker needs it.
#[derive(Debug, Clone)]
pub struct JobDocument {
    pub id: Uuid,
    pub status: ManagerStatus,
    /// `{datasource: {table: [fields]}}`.
    pub mapped_fields: Document,
    /// `{datasource: {table: {field: {operator: values}}}}`; empty when absent.
    pub filters: Document,
    /// The request's metadata plus what Workers wrote (`error`, the markers); empty when absent.
    pub metadata: Document,
    pub request_hash: Option<String>,
    /// `None` for a document from before the Manager wrote the field.
    pub dedup_active: Option<bool>,
    /// `None` when absent or `""` (the Manager's publish-failure write stores `""`).
    pub result_path: Option<String>,
    pub result_hmac: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub marker: Marker,
    /// This Worker's own sub-document, when it has written one.
    pub fetcher_worker: Option<Document>,
}

impl JobDocument {
    /// `metadata` without the marker keys: what the Manager's `GET` shows, and what the job's
    /// event carries.
    pub fn request_metadata(&self) -> Document {
        let mut shown = self.metadata.clone();
        for key in [MARKER_PENDING, MARKER_STATUS, MARKER_PAYLOAD] {
            shown.remove(key);
        }
        shown
    }

    /// The event a repairer re-emits for this job: the marker's, when the job's status is
    /// terminal and equal to the marker's status (`extract_data.go:381-419`); otherwise why not.
    pub fn event_to_repair(&self) -> std::result::Result<&PendingEvent, String> {
        match &self.marker {
            Marker::None => Err("no terminal event is pending".to_owned()),
            Marker::Unusable(why) => Err(why.clone()),
            Marker::Pending(event) => match self.status.terminal() {
                Some(status) if status == event.status => Ok(event),
                _ => Err(format!(
                    "the marker says {} but the job is {}",
                    event.status,
                    self.status.as_str()
                )),
            },
        }
    }
}

/// The job `id`, as the Go Worker loads it (`FindOne({_id})`).
pub async fn read(store: &Store, id: Uuid) -> Result<JobDocument> {
    let found = store
        .jobs()
        .find_one(doc! {"_id": binary_id(id)})
        .await
        .map_err(|e| Error::unavailable(&e))?;
    let document = found.ok_or(Error::JobNotFound(id))?;
    decode(document).map_err(|reason| Error::UndecodableJob { id, reason })
}

/// One repairer pass's jobs: terminal, marked, oldest completion first, at most `limit`
/// (`Find({status: {$in: [completed, failed]}, "metadata.terminalEventPending": true})` sorted
/// `{completed_at: 1, created_at: 1}`, which `idx_job_terminal_event_repair` serves, §5). A
/// document Go could not decode is returned as its error (naming the nil id when `_id` itself is
/// unreadable), so one bad job does not hide the others; check each with [`JobDocument::event_to_repair`] before re-emitting.
pub async fn marked_terminal(store: &Store, limit: i64) -> Result<Vec<Result<JobDocument>>> {
    let mut cursor = store
        .jobs()
        .find(doc! {
            "status": {"$in": ["completed", "failed"]},
            format!("metadata.{MARKER_PENDING}"): true,
        })
        .sort(doc! {"completed_at": 1, "created_at": 1})
        .limit(limit)
        .await
        .map_err(|e| Error::unavailable(&e))?;
    let mut jobs = Vec::new();
    while cursor.advance().await.map_err(|e| Error::unavailable(&e))? {
        let document: Document = cursor
            .deserialize_current()
            .map_err(|e| Error::unavailable(&e))?;
        let id = document_id(&document).unwrap_or(Uuid::nil());
        jobs.push(decode(document).map_err(|reason| Error::UndecodableJob { id, reason }));
    }
    Ok(jobs)
}

fn document_id(document: &Document) -> std::result::Result<Uuid, String> {
    match document.get("_id") {
        Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Generic => {
            Uuid::from_slice(&b.bytes).map_err(|_| "_id is not 16 bytes".to_owned())
        }
        other => Err(format!("_id is not binary of subtype 0: {}", kind(other))),
    }
}

/// Go's decoder and `ToEntity`, field by field; an unknown field is skipped.
pub(crate) fn decode(mut document: Document) -> std::result::Result<JobDocument, String> {
    let id = document_id(&document)?;
    let status = match document.get("status") {
        Some(Bson::String(text)) => ManagerStatus::parse(text)
            .ok_or_else(|| format!("invalid job status {:?}", text.trim()))?,
        other => return Err(format!("status is {}", kind(other))),
    };
    let mut sub_document = |field: &str| match document.remove(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d)),
        Some(other) => Err(format!("{field} is {}", kind(Some(&other)))),
    };
    let mapped_fields = sub_document("mapped_fields")?.unwrap_or_default();
    let filters = sub_document("filters")?.unwrap_or_default();
    let metadata = sub_document("metadata")?.unwrap_or_default();
    let fetcher_worker = sub_document(WORKER_FIELD)?;
    let text = |field: &str| match document.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::String(s)) if s.is_empty() => Ok(None),
        Some(Bson::String(s)) => Ok(Some(s.clone())),
        other => Err(format!("{field} is {}", kind(other))),
    };
    let date = |field: &str| match document.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::DateTime(at)) => Ok(DateTime::from_timestamp_millis(at.timestamp_millis())),
        other => Err(format!("{field} is {}", kind(other))),
    };
    let dedup_active = match document.get("dedup_active") {
        None | Some(Bson::Null) => None,
        Some(Bson::Boolean(active)) => Some(*active),
        other => return Err(format!("dedup_active is {}", kind(other))),
    };
    Ok(JobDocument {
        id,
        status,
        mapped_fields,
        filters,
        request_hash: text("request_hash")?,
        dedup_active,
        result_path: text("result_path")?,
        result_hmac: text("result_hmac")?,
        created_at: date("created_at")?,
        completed_at: date("completed_at")?,
        marker: marker(&metadata),
        metadata,
        fetcher_worker,
    })
}

fn marker(metadata: &Document) -> Marker {
    if metadata.get(MARKER_PENDING) != Some(&Bson::Boolean(true)) {
        return Marker::None;
    }
    let text = |key: &str| match metadata.get(key) {
        Some(Bson::String(s)) if !s.is_empty() => Ok(s.clone()),
        other => Err(format!(
            "metadata.{key} is {}, not a non-empty string",
            kind(other)
        )),
    };
    let status = match text(MARKER_STATUS) {
        Ok(status) => status,
        Err(why) => return Marker::Unusable(why),
    };
    let Ok(status) = status.parse::<TerminalStatus>() else {
        return Marker::Unusable(format!("metadata.{MARKER_STATUS} is not terminal"));
    };
    match text(MARKER_PAYLOAD) {
        Ok(payload) => Marker::Pending(PendingEvent { status, payload }),
        Err(why) => Marker::Unusable(why),
    }
}

/// A value's BSON type, for the reasons: never the value, which may be a request's data.
pub(crate) fn kind(value: Option<&Bson>) -> String {
    match value {
        None => "absent".to_owned(),
        Some(value) => format!("of BSON type {:?}", value.element_type()),
    }
}

/// A chrono time as a BSON datetime (milliseconds, as Go's driver stores a `time.Time`).
pub(crate) fn bson_time(at: DateTime<Utc>) -> bson::DateTime {
    bson::DateTime::from_millis(at.timestamp_millis())
}

//! The Go Worker's writes to a job document (UPSTREAM-MANAGER §1.4 steps 3, 5, 6; §9 items
//! 3-6), one `UpdateOne` each, never an insert or an upsert.
//!
//! Upstream's gaps and what is chosen here:
//! - Go moves a job to `processing` with no status in the filter, so two Workers given the same
//!   message may both run it (§6.2). [`start_processing`] adds the compatible compare-and-set
//!   `{_id, status: "pending"}` and says what it found when the CAS fails.
//! - Go's terminal write has no status in its filter either. [`record_terminal`] takes the
//!   status the caller expects the job to be in (the lifecycle machine judged the transition from
//!   it), so a job another Worker ended meanwhile is not written over; `None` is Go's
//!   unconditional write.
//! - What this Worker records beyond upstream goes in the same `UpdateOne`, as dotted `$set`s
//!   under [`WORKER_FIELD`], so the document never shows a status without its own bookkeeping.

use chrono::{DateTime, Utc};
use contract::event::TerminalStatus;
use contract::Redacted;
use mongodb::bson::{doc, Bson, Document};
use uuid::Uuid;

use crate::jobs::{
    self, ManagerStatus, MARKER_PAYLOAD, MARKER_PENDING, MARKER_STATUS, WORKER_FIELD,
};
use crate::{binary_id, Error, Result, Store};

/// What a conditional write found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The document was in the expected status and now holds the write.
    Done,
    /// The document was in `current`, not the expected status; nothing was written.
    Refused { current: ManagerStatus },
}

/// The move to `processing` (§9 item 4): `$set {status: "processing", dedup_active: true}` and
/// `$unset {completed_at}`, only while the job is `pending`, with `worker` (may be empty) set
/// under [`WORKER_FIELD`] in the same write. A job that is no longer pending is
/// [`Written::Refused`] with its status; a job that does not exist is [`Error::JobNotFound`];
/// one in a status Go cannot read is [`Error::UndecodableJob`].
pub async fn start_processing(store: &Store, id: Uuid, worker: &Document) -> Result<Written> {
    let mut set = doc! {"status": "processing", "dedup_active": true};
    set_worker_fields(&mut set, worker)?;
    let update = doc! {"$set": set, "$unset": {"completed_at": ""}};
    let filter = doc! {"_id": binary_id(id), "status": "pending"};
    conditional(store, id, filter, update).await
}

/// How a job ended, as the Manager is told.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// `result_path` (the object key without the S3 prefix) and `result_hmac` (lower-case hex);
    /// each is written only when non-empty, as Go writes them.
    Completed {
        result_path: String,
        result_hmac: String,
    },
    /// `metadata.error`, a redacted string. A canceled job ends here too, its error saying so:
    /// the Manager knows no other status.
    Failed { error: Redacted },
}

impl Outcome {
    pub fn status(&self) -> TerminalStatus {
        match self {
            Outcome::Completed { .. } => TerminalStatus::Completed,
            Outcome::Failed { .. } => TerminalStatus::Failed,
        }
    }
}

/// The terminal write (§9 item 5).
#[derive(Debug, Clone)]
pub struct Terminal<'a> {
    pub outcome: Outcome,
    pub completed_at: DateTime<Utc>,
    /// The event body exactly as it is published (compact JSON), kept as the marker's payload so
    /// that either implementation's repairer can re-emit it byte for byte.
    pub event_payload: &'a str,
    /// The status the job must be in; `None` writes whatever it is, as Go does.
    pub expect: Option<ManagerStatus>,
    /// This Worker's own fields, set under [`WORKER_FIELD`] in the same write (may be empty).
    pub worker: &'a Document,
}

/// One `UpdateOne` of dotted `$set`s: `status` (`completed`|`failed`), `dedup_active: false`,
/// `completed_at`, the result fields or `metadata.error`, and the three markers (bool, string,
/// string). `metadata` itself is never replaced, so the request's keys survive. A payload that
/// is not JSON is refused before anything is written.
pub async fn record_terminal(store: &Store, id: Uuid, terminal: &Terminal<'_>) -> Result<Written> {
    if serde_json::from_str::<&serde_json::value::RawValue>(terminal.event_payload).is_err() {
        return Err(Error::InvalidWrite {
            what: "the terminal event payload",
            reason: "it is not JSON".to_owned(),
        });
    }
    let status = terminal.outcome.status();
    let mut set = doc! {
        "status": status.as_str(),
        "dedup_active": false,
        "completed_at": jobs::bson_time(terminal.completed_at),
    };
    match &terminal.outcome {
        Outcome::Completed {
            result_path,
            result_hmac,
        } => {
            if !result_path.is_empty() {
                set.insert("result_path", result_path);
            }
            if !result_hmac.is_empty() {
                set.insert("result_hmac", result_hmac);
            }
        }
        Outcome::Failed { error } => {
            set.insert("metadata.error", error.as_str());
        }
    }
    set.insert(format!("metadata.{MARKER_PENDING}"), true);
    set.insert(format!("metadata.{MARKER_STATUS}"), status.as_str());
    set.insert(format!("metadata.{MARKER_PAYLOAD}"), terminal.event_payload);
    set_worker_fields(&mut set, terminal.worker)?;
    let mut filter = doc! {"_id": binary_id(id)};
    if let Some(expect) = terminal.expect {
        filter.insert("status", expect.as_str());
    }
    conditional(store, id, filter, doc! {"$set": set}).await
}

/// Clears the marker once the event's outbox row is written (§9 item 6): `$unset` of exactly the
/// three marker keys; `metadata.error` stays. `false` when the job no longer exists.
pub async fn clear_marker(store: &Store, id: Uuid) -> Result<bool> {
    let unset = doc! {
        format!("metadata.{MARKER_PENDING}"): "",
        format!("metadata.{MARKER_STATUS}"): "",
        format!("metadata.{MARKER_PAYLOAD}"): "",
    };
    let done = store
        .jobs()
        .update_one(doc! {"_id": binary_id(id)}, doc! {"$unset": unset})
        .await
        .map_err(|e| Error::unavailable(&e))?;
    Ok(done.matched_count == 1)
}

/// Adds `worker`'s keys to `set` as `fetcher_worker.<key>`, refusing the keys Go refuses in
/// metadata (`.` or a leading `$`), which would write elsewhere than meant.
fn set_worker_fields(set: &mut Document, worker: &Document) -> Result<()> {
    for (key, value) in worker {
        if key.is_empty() || key.contains('.') || key.starts_with('$') {
            return Err(Error::InvalidWrite {
                what: "a Worker field",
                reason: format!("the key {key:?} is empty, has a '.' or starts with '$'"),
            });
        }
        set.insert(format!("{WORKER_FIELD}.{key}"), value.clone());
    }
    Ok(())
}

/// Runs `update` on `filter`; on no match, reads why: the job's current status, or not found.
async fn conditional(
    store: &Store,
    id: Uuid,
    filter: Document,
    update: Document,
) -> Result<Written> {
    let done = store
        .jobs()
        .update_one(filter, update)
        .await
        .map_err(|e| Error::unavailable(&e))?;
    if done.matched_count == 1 {
        return Ok(Written::Done);
    }
    let current = store
        .jobs()
        .find_one(doc! {"_id": binary_id(id)})
        .projection(doc! {"status": 1})
        .await
        .map_err(|e| Error::unavailable(&e))?
        .ok_or(Error::JobNotFound(id))?;
    match current.get("status") {
        Some(Bson::String(text)) => match ManagerStatus::parse(text) {
            Some(current) => Ok(Written::Refused { current }),
            None => Err(Error::UndecodableJob {
                id,
                reason: format!("invalid job status {:?}", text.trim()),
            }),
        },
        other => Err(Error::UndecodableJob {
            id,
            reason: format!("status is {}", jobs::kind(other)),
        }),
    }
}

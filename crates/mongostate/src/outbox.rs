//! lib-streaming's outbox row (UPSTREAM-MANAGER §4.2), written as a Go Worker's `Emit` writes it
//! and read as lib-streaming's reader reads it, so a Go relay publishes this Worker's rows and this
//! Worker's relay publishes Go's. The envelope inside `payload` is `outbox_envelope`'s.

use chrono::{DateTime, Utc};
use contract::event::TerminalStatus;
use mongodb::bson::{doc, Bson, Document};
use uuid::Uuid;

use crate::jobs::{bson_time, kind};
use crate::{Error, Result, Store};

pub use crate::outbox_envelope::{aggregate_id, envelope, Envelope, TARGET};

/// Every row's `event_type`: the one lib-streaming handler Fetcher registers.
pub const EVENT_TYPE: &str = "lerian.streaming.publish";
/// The `tenant_id` of a single-tenant deployment's rows (§0.1).
pub const SINGLE_TENANT: &str = "single-tenant";
/// lib-commons' limit on a tenant id.
const MAX_TENANT: usize = 256;

/// One terminal event to queue.
#[derive(Debug, Clone)]
pub struct Emit<'a> {
    /// [`SINGLE_TENANT`], or the tenant in a multi-tenant deployment.
    pub tenant: &'a str,
    pub job_id: Uuid,
    pub status: TerminalStatus,
    /// The event body as published (compact JSON, Go's escaping).
    pub body: &'a str,
    /// `RABBITMQ_JOB_EVENTS_EXCHANGE`.
    pub exchange: &'a str,
    /// `STREAMING_CLOUDEVENTS_SOURCE`.
    pub source: &'a str,
    /// The emit time: the event's `Timestamp` and the row's `created_at`/`updated_at`.
    pub at: DateTime<Utc>,
}

/// A row's `status` (`lc:commons/outbox/event.go:15-19`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowStatus {
    Pending,
    Processing,
    Published,
    Failed,
    Invalid,
}

impl RowStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RowStatus::Pending => "PENDING",
            RowStatus::Processing => "PROCESSING",
            RowStatus::Published => "PUBLISHED",
            RowStatus::Failed => "FAILED",
            RowStatus::Invalid => "INVALID",
        }
    }

    fn parse(text: &str) -> Option<RowStatus> {
        [
            RowStatus::Pending,
            RowStatus::Processing,
            RowStatus::Published,
            RowStatus::Failed,
            RowStatus::Invalid,
        ]
        .into_iter()
        .find(|status| status.as_str() == text)
    }
}

/// A new row as lib-streaming's `Create` writes it, with a fresh UUIDv7 `id`.
pub fn new_row(emit: &Emit<'_>) -> Result<(Uuid, Document)> {
    let payload = envelope(emit)?;
    let id = Uuid::now_v7();
    let at = bson_time(emit.at);
    let row = doc! {
        "id": id.hyphenated().to_string(),
        "event_type": EVENT_TYPE,
        "aggregate_id": aggregate_id(emit.tenant).hyphenated().to_string(),
        "payload": payload,
        "status": RowStatus::Pending.as_str(),
        "attempts": 0_i32,
        "created_at": at,
        "updated_at": at,
        "tenant_id": emit.tenant,
    };
    Ok((id, row))
}

/// Queues `emit`: one `InsertOne` into `streaming_outbox_events`; the row's `id`.
pub async fn insert(store: &Store, emit: &Emit<'_>) -> Result<Uuid> {
    let (id, row) = new_row(emit)?;
    store
        .outbox_rows()
        .insert_one(row)
        .await
        .map_err(|e| Error::unavailable(&e))?;
    Ok(id)
}

/// A row as lib-streaming's reader decodes it (`lc:commons/outbox/mongo/document.go:61-79`).
#[derive(Debug, Clone, PartialEq)]
pub struct OutboxRow {
    pub id: String,
    pub event_type: String,
    pub aggregate_id: String,
    pub payload: String,
    pub status: RowStatus,
    pub attempts: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub tenant_id: String,
    pub published_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub claim_token: Option<String>,
}

impl OutboxRow {
    /// Decodes `document`, failing where lib-streaming's reader fails (§4.2).
    pub fn from_document(document: &Document) -> Result<OutboxRow> {
        let id = match document.get("id") {
            Some(Bson::String(id)) => id.clone(),
            other => {
                return Err(Error::UndecodableRow {
                    id: String::new(),
                    reason: format!("id is {}", kind(other)),
                })
            }
        };
        let undecodable = |reason: String| Error::UndecodableRow {
            id: id.clone(),
            reason,
        };
        let text = |field: &str| match document.get(field) {
            Some(Bson::String(s)) => Ok(Some(s.clone())),
            None | Some(Bson::Null) => Ok(None),
            other => Err(undecodable(format!("{field} is {}", kind(other)))),
        };
        let required =
            |field: &str| text(field)?.ok_or_else(|| undecodable(format!("{field} is absent")));
        let date = |field: &str| match document.get(field) {
            Some(Bson::DateTime(at)) => Ok(DateTime::from_timestamp_millis(at.timestamp_millis())),
            None | Some(Bson::Null) => Ok(None),
            other => Err(undecodable(format!("{field} is {}", kind(other)))),
        };
        let status = required("status")?;
        let status = RowStatus::parse(&status)
            .ok_or_else(|| undecodable(format!("status {status:?} is not an outbox status")))?;
        let attempts = match document.get("attempts") {
            Some(Bson::Int32(n)) => *n,
            Some(Bson::Int64(n)) => {
                i32::try_from(*n).map_err(|_| undecodable("attempts is out of range".to_owned()))?
            }
            None => 0,
            other => return Err(undecodable(format!("attempts is {}", kind(other)))),
        };
        let created_at =
            date("created_at")?.ok_or_else(|| undecodable("created_at is absent".to_owned()))?;
        let updated_at =
            date("updated_at")?.ok_or_else(|| undecodable("updated_at is absent".to_owned()))?;
        Ok(OutboxRow {
            event_type: required("event_type")?,
            aggregate_id: required("aggregate_id")?,
            payload: required("payload")?,
            status,
            attempts,
            created_at,
            updated_at,
            tenant_id: text("tenant_id")?.unwrap_or_default(),
            published_at: date("published_at")?,
            last_error: text("last_error")?,
            claim_token: text("claim_token")?,
            id,
        })
    }

    /// The envelope a relay publishes from, validated as lib-streaming's handler validates it.
    pub fn envelope(&self) -> Result<Envelope> {
        if self.event_type != EVENT_TYPE {
            return Err(Error::InvalidEnvelope {
                id: self.id.clone(),
                reason: format!("event_type {:?} has no handler", self.event_type),
            });
        }
        Envelope::parse(&self.id, &self.payload)
    }
}

/// lib-commons' tenant rule: `^[A-Za-z0-9][A-Za-z0-9_-]*$`, at most 256 bytes.
pub(crate) fn check_tenant(tenant: &str) -> Result<()> {
    let mut chars = tenant.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if first_ok && rest_ok && tenant.len() <= MAX_TENANT {
        Ok(())
    } else {
        Err(invalid(
            "the tenant",
            "it is not 1-256 letters, digits, '_' or '-' starting with a letter or digit"
                .to_owned(),
        ))
    }
}

pub(crate) fn invalid(what: &'static str, reason: String) -> Error {
    Error::InvalidWrite { what, reason }
}

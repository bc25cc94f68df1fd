//! The job as the control API reads it from the Manager's document: the lifecycle's status and
//! flags from `fetcher_worker` (a canceled job reads `canceled` though the Manager shows
//! `failed`), the request from the Manager's fields, in the PostgreSQL store's row types so the
//! API answers the same document on either backend.

use chrono::{DateTime, Utc};
use contract::lifecycle::JobStatus;
use mongodb::bson::{Bson, Document};
use outbox::{ExecutionRow, JobRow, OutboxError};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::binary_id;
use crate::control::event_metadata;
use crate::executions;
use crate::jobs::{decode, ManagerStatus};
use crate::manager_store::{field, to_outbox, unavailable, ManagerStore, Seen};

const STEP: &str = "reading a job";

impl ManagerStore {
    /// The job's document as a row, if the Manager has it.
    pub async fn job(&self, job_id: Uuid) -> Result<Option<JobRow>, OutboxError> {
        Ok(self.seen(job_id).await?.map(|seen| job_row(&seen)))
    }

    /// The job's executions, by datasource name (none for a job this Worker never ran).
    pub async fn executions(&self, job_id: Uuid) -> Result<Vec<ExecutionRow>, OutboxError> {
        let Some(seen) = self.seen(job_id).await? else {
            return Ok(Vec::new());
        };
        let worker = seen.worker();
        // The job's runs so far, as the PostgreSQL store shows them.
        let deliveries = worker
            .get_i32(crate::manager_store::field::ATTEMPTS)
            .unwrap_or(0);
        let mut rows: Vec<ExecutionRow> = executions::stored(&worker)
            .iter()
            .map(|execution| ExecutionRow {
                deliveries,
                ..execution_row(execution)
            })
            .collect();
        rows.sort_by(|a, b| a.datasource.cmp(&b.datasource));
        Ok(rows)
    }

    async fn seen(&self, job_id: Uuid) -> Result<Option<Seen>, OutboxError> {
        let found = self
            .store()
            .jobs()
            .find_one(mongodb::bson::doc! {"_id": binary_id(job_id)})
            .await
            .map_err(|e| unavailable(STEP, &e))?;
        let Some(document) = found else {
            return Ok(None);
        };
        let job = decode(document).map_err(|detail| OutboxError::Corrupt { step: STEP, detail })?;
        Seen::of(job).map(Some).map_err(|e| to_outbox(STEP, e))
    }
}

fn job_row(seen: &Seen) -> JobRow {
    let worker = seen.worker();
    let text = |key: &str| worker.get_str(key).ok().map(str::to_owned);
    let number = |key: &str| match worker.get(key) {
        Some(Bson::Int64(n)) => Some(*n),
        Some(Bson::Int32(n)) => Some(i64::from(*n)),
        _ => None,
    };
    let date = |key: &str| date(&worker, key);
    let job = &seen.job;
    let status = seen.state.status;
    // A failed end's `metadata.error` is the job's error; a canceled job's says canceled, which
    // the API tells by its status (and `errorMessage` stays null, as on PostgreSQL).
    let canceled = date(field::CANCEL_REQUESTED_AT).is_some();
    let failed = job.status == ManagerStatus::Failed
        && (status == JobStatus::Failed
            || (matches!(status, JobStatus::DeletionInProgress | JobStatus::Deleted) && !canceled));
    let error_message = failed
        .then(|| job.metadata.get_str("error").ok().map(str::to_owned))
        .flatten();
    let created_at = job.created_at.unwrap_or_default();
    let finished_at = date(field::FINISHED_AT).or(job.completed_at);
    let started_at = date(field::STARTED_AT);
    let updated_at = date(field::UPDATED_AT)
        .into_iter()
        .chain(finished_at)
        .chain(started_at)
        .max()
        .unwrap_or(created_at);
    let spec = serde_json::json!({
        "mappedFields": Bson::Document(job.mapped_fields.clone()).into_relaxed_extjson(),
        "filters": Value::Object(filters(&job.filters)),
    });
    JobRow {
        job_id: job.id,
        tenant_id: seen.tenant.clone(),
        status: status.as_str().to_owned(),
        request_id: text(field::REQUEST_ID),
        metadata: event_metadata(seen),
        spec: Some(spec),
        result_path: job.result_path.clone(),
        result_hmac: job.result_hmac.clone(),
        result_size_bytes: number(field::RESULT_SIZE_BYTES),
        result_row_count: number(field::RESULT_ROW_COUNT),
        error_message,
        attempts: number(field::ATTEMPTS)
            .and_then(|n| i32::try_from(n).ok())
            .unwrap_or(0),
        owner: seen.owner.clone(),
        lease_expires_at: seen.lease_expires_at,
        created_at,
        started_at,
        finished_at,
        updated_at,
        first_started_at: date(field::FIRST_STARTED_AT),
        timeout_seconds: number(field::TIMEOUT_SECONDS).and_then(|n| i32::try_from(n).ok()),
        cancel_requested: seen.state.cancel_requested,
        force_canceled: seen.state.force,
        comment: text(field::COMMENT),
        reason_code: text(field::REASON_CODE),
        deleted_at: date(field::DELETED_AT),
    }
}

fn execution_row(execution: &Document) -> ExecutionRow {
    let text = |key: &str| execution.get_str(key).ok().map(str::to_owned);
    let number = |key: &str| match execution.get(key) {
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Int32(n)) => i64::from(*n),
        _ => 0,
    };
    ExecutionRow {
        datasource: text("datasource").unwrap_or_default(),
        status: text("status").unwrap_or_default(),
        row_count: number("row_count"),
        tables: i32::try_from(number("tables")).unwrap_or(0),
        started_at: date(execution, "started_at"),
        ended_at: date(execution, "ended_at"),
        error: text("error"),
        attempts: i32::try_from(number("attempts")).unwrap_or(0),
        last_error: text("last_error"),
        deliveries: 0,
    }
}

fn date(document: &Document, key: &str) -> Option<DateTime<Utc>> {
    match document.get(key) {
        Some(Bson::DateTime(at)) => DateTime::from_timestamp_millis(at.timestamp_millis()),
        _ => None,
    }
}

/// The Manager's stored filters as a job message writes them: Go stores each condition's
/// operators by their lower-cased Go field names, unset ones as `null` (UPSTREAM-MANAGER §1.2);
/// the Manager's `GET` shows them by their JSON names, without the unset ones.
fn filters(stored: &Document) -> Map<String, Value> {
    let nested = |document: &Document, inner: &dyn Fn(&Document) -> Map<String, Value>| {
        document
            .iter()
            .filter_map(|(key, value)| {
                Some((key.clone(), Value::Object(inner(value.as_document()?))))
            })
            .collect::<Map<String, Value>>()
    };
    let condition = |document: &Document| {
        document
            .iter()
            .filter(|(_, value)| !matches!(value, Bson::Null))
            .map(|(op, value)| {
                let name = match op.as_str() {
                    "equals" => "eq",
                    "notequals" => "ne",
                    "greaterthan" => "gt",
                    "greaterorequal" => "gte",
                    "lessthan" => "lt",
                    "lessorequal" => "lte",
                    "notin" => "nin",
                    other => other,
                };
                (name.to_owned(), value.clone().into_relaxed_extjson())
            })
            .collect::<Map<String, Value>>()
    };
    let field = |document: &Document| nested(document, &condition);
    let table = |document: &Document| nested(document, &field);
    let datasource = |document: &Document| nested(document, &table);
    datasource(stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::json_map;
    use mongodb::bson::doc;

    #[test]
    fn stored_filters_read_as_the_managers_get_shows_them() {
        let stored = doc! {"ledger": {"accounts": {"id": {
            "equals": Bson::Null, "greaterorequal": [10], "notin": [1, 2], "like": Bson::Null,
        }}}};
        let shown = Value::Object(filters(&stored));
        assert_eq!(
            shown,
            serde_json::json!({"ledger": {"accounts": {"id": {"gte": [10], "nin": [1, 2]}}}})
        );
    }

    #[test]
    fn a_documents_metadata_reads_as_json() {
        let map = json_map(&doc! {"source": "reporter", "n": 1.5});
        assert_eq!(map.get("source"), Some(&Value::from("reporter")));
    }
}

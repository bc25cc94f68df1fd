//! The job as the control API and `fetcherctl` read it: its row and its executions, as stored.
//! The claims and leases that write them are in `jobs.rs`; the pages of jobs in `listing.rs`.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::postgres::PgRow;
use sqlx::types::Json;
use sqlx::Row;
use uuid::Uuid;

use crate::error::{OutboxError, Result};
use crate::store::Store;

/// A job row, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    pub job_id: Uuid,
    pub tenant_id: Option<String>,
    /// One of the lifecycle's statuses ([`JobStatus`] by its wire name).
    pub status: String,
    pub request_id: Option<String>,
    pub metadata: Map<String, Value>,
    pub spec: Option<Value>,
    pub result_path: Option<String>,
    pub result_hmac: Option<String>,
    pub result_size_bytes: Option<i64>,
    pub result_row_count: Option<i64>,
    /// The redacted error of a failed job.
    pub error_message: Option<String>,
    pub attempts: i32,
    pub owner: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
    /// The lifecycle's columns (migration 0006).
    pub first_started_at: Option<DateTime<Utc>>,
    pub timeout_seconds: Option<i32>,
    pub cancel_requested: bool,
    pub force_canceled: bool,
    pub comment: Option<String>,
    pub reason_code: Option<String>,
    pub deleted_at: Option<DateTime<Utc>>,
}

/// One datasource's execution of a job (lifecycle §1), as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionRow {
    pub datasource: String,
    /// An [`contract::lifecycle::ExecutionStatus`] by its wire name.
    pub status: String,
    pub row_count: i64,
    pub tables: i32,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
    /// The redacted error it ended with.
    pub error: Option<String>,
    /// Attempts its run made at it (0: not started; more than 1: it was retried).
    pub attempts: i32,
    /// The redacted error of its last attempt that failed and was retried.
    pub last_error: Option<String>,
    /// Its job's runs so far (the job's claims: more than 1 once its message came back).
    pub deliveries: i32,
}

impl ExecutionRow {
    /// Its `statusDetails` (lifecycle §3).
    pub fn status_details(&self) -> Map<String, Value> {
        crate::executions::status_details(
            self.error.clone(),
            u32::try_from(self.attempts).unwrap_or(0),
            self.last_error.clone(),
            self.deliveries.unsigned_abs(),
        )
    }
}

impl Store {
    /// The job's row, if it exists.
    pub async fn job(&self, job_id: Uuid) -> Result<Option<JobRow>> {
        let db = |e| OutboxError::sqlx("reading a job", e);
        let row = sqlx::query("SELECT * FROM jobs WHERE job_id = $1")
            .bind(job_id)
            .fetch_optional(self.pool())
            .await
            .map_err(db)?;
        row.as_ref().map(job_row).transpose().map_err(db)
    }

    /// The job's executions, by datasource name.
    pub async fn executions(&self, job_id: Uuid) -> Result<Vec<ExecutionRow>> {
        let rows = sqlx::query(
            "SELECT datasource, status, row_count, tables, started_at, ended_at, error, attempts,
                    last_error, (SELECT j.attempts FROM jobs j WHERE j.job_id = $1) AS deliveries
             FROM job_executions WHERE job_id = $1 ORDER BY datasource",
        )
        .bind(job_id)
        .fetch_all(self.pool())
        .await
        .map_err(|e| OutboxError::sqlx("reading a job's executions", e))?;
        rows.iter()
            .map(execution_row)
            .collect::<Result<_, sqlx::Error>>()
            .map_err(|e| OutboxError::sqlx("reading a job's executions", e))
    }
}

/// An execution as `job_executions` holds it (the columns `executions` selects).
pub(crate) fn execution_row(row: &PgRow) -> Result<ExecutionRow, sqlx::Error> {
    Ok(ExecutionRow {
        datasource: row.try_get("datasource")?,
        status: row.try_get("status")?,
        row_count: row.try_get("row_count")?,
        tables: row.try_get("tables")?,
        started_at: row.try_get("started_at")?,
        ended_at: row.try_get("ended_at")?,
        error: row.try_get("error")?,
        attempts: row.try_get("attempts")?,
        last_error: row.try_get("last_error")?,
        deliveries: row.try_get::<Option<i32>, _>("deliveries")?.unwrap_or(0),
    })
}

pub(crate) fn job_row(row: &PgRow) -> Result<JobRow, sqlx::Error> {
    let Json(metadata) = row.try_get("metadata")?;
    Ok(JobRow {
        job_id: row.try_get("job_id")?,
        tenant_id: row.try_get("tenant_id")?,
        status: row.try_get("status")?,
        request_id: row.try_get("request_id")?,
        metadata,
        spec: row.try_get("spec")?,
        result_path: row.try_get("result_path")?,
        result_hmac: row.try_get("result_hmac")?,
        result_size_bytes: row.try_get("result_size_bytes")?,
        result_row_count: row.try_get("result_row_count")?,
        error_message: row.try_get("error_message")?,
        attempts: row.try_get("attempts")?,
        owner: row.try_get("owner")?,
        lease_expires_at: row.try_get("lease_expires_at")?,
        created_at: row.try_get("created_at")?,
        started_at: row.try_get("started_at")?,
        finished_at: row.try_get("finished_at")?,
        updated_at: row.try_get("updated_at")?,
        first_started_at: row.try_get("first_started_at")?,
        timeout_seconds: row.try_get("timeout_seconds")?,
        cancel_requested: row.try_get("cancel_requested")?,
        force_canceled: row.try_get("force_canceled")?,
        comment: row.try_get("comment")?,
        reason_code: row.try_get("reason_code")?,
        deleted_at: row.try_get("deleted_at")?,
    })
}

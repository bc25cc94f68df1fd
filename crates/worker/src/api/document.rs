//! The job document (lifecycle §3): the Manager's `JobResponse` shape plus the lifecycle's
//! members, its executions and their counts. It carries no secret: no connection detail, only
//! the job's own request, result reference and redacted errors.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use contract::lifecycle::{ExecutionStatus, JobProcessDetails};
use outbox::{ExecutionRow, JobRow};
use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct JobDocument {
    id: String,
    status: String,
    metadata: Map<String, Value>,
    mapped_fields: Value,
    filters: Value,
    result_path: Option<String>,
    result_hmac: Option<String>,
    created_at: String,
    started_at: Option<String>,
    completed_at: Option<String>,
    last_updated_at: String,
    timeout_seconds: u64,
    attempts: i32,
    force_canceled: bool,
    comment: Option<String>,
    reason_code: Option<String>,
    cancel_requested: bool,
    /// A failed job's redacted reason, as its `job.failed` event carries it (a job that failed
    /// before any datasource ran has no execution to tell it).
    error_message: Option<String>,
    executions: Vec<Execution>,
    job_process_details: Map<String, Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Execution {
    datasource: String,
    status: String,
    row_count: i64,
    tables: i32,
    started_at: Option<String>,
    ended_at: Option<String>,
    status_details: Map<String, Value>,
}

impl JobDocument {
    pub(super) fn new(job: JobRow, executions: Vec<ExecutionRow>, default: Duration) -> Self {
        let spec = job.spec.unwrap_or(Value::Null);
        let member = |name: &str| {
            spec.get(name)
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new()))
        };
        let statuses = executions
            .iter()
            .filter_map(|e| e.status.parse::<ExecutionStatus>().ok());
        let details = JobProcessDetails::of(statuses)
            .members()
            .into_iter()
            .map(|(name, count)| (name.to_owned(), Value::from(count)))
            .collect();
        JobDocument {
            id: job.job_id.as_hyphenated().to_string(),
            status: job.status,
            metadata: job.metadata,
            mapped_fields: member("mappedFields"),
            filters: member("filters"),
            result_path: job.result_path,
            result_hmac: job.result_hmac,
            created_at: time(job.created_at),
            started_at: job.first_started_at.or(job.started_at).map(time),
            completed_at: job.finished_at.map(time),
            last_updated_at: time(job.updated_at),
            timeout_seconds: job
                .timeout_seconds
                .and_then(|s| u64::try_from(s).ok())
                .unwrap_or(default.as_secs()),
            attempts: job.attempts,
            force_canceled: job.force_canceled,
            comment: job.comment,
            reason_code: job.reason_code,
            cancel_requested: job.cancel_requested,
            error_message: job.error_message,
            executions: executions.into_iter().map(Execution::from).collect(),
            job_process_details: details,
        }
    }
}

impl From<ExecutionRow> for Execution {
    fn from(row: ExecutionRow) -> Execution {
        let status_details = row.status_details();
        Execution {
            datasource: row.datasource,
            status: row.status,
            row_count: row.row_count,
            tables: row.tables,
            started_at: row.started_at.map(time),
            ended_at: row.ended_at.map(time),
            status_details,
        }
    }
}

fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

//! The bodies of the lifecycle's events (lifecycle §4): compact Go-style JSON, members in the
//! order written there, absent members omitted; frozen when recorded, like a terminal body.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::json::{JsonError, JsonWriter, Style};
use crate::lifecycle::{ExecutionStatus, JobProcessDetails};

/// `job.cancellation_in_progress` (`canceled: None`) or `job.canceled`.
#[derive(Debug, Clone, Copy)]
pub struct CancelBody<'a> {
    pub job_id: Uuid,
    /// The job's metadata, as its terminal events carry it.
    pub metadata: &'a Map<String, Value>,
    pub force: bool,
    pub comment: Option<&'a str>,
    pub reason_code: Option<&'a str>,
    /// For `job.canceled`: when, and the executions' counts at that moment.
    pub canceled: Option<(DateTime<Utc>, JobProcessDetails)>,
}

/// `job.deletion_in_progress` (`deleted: None`) or `job.deleted`.
#[derive(Debug, Clone, Copy)]
pub struct DeletionBody<'a> {
    pub job_id: Uuid,
    pub metadata: &'a Map<String, Value>,
    pub comment: Option<&'a str>,
    /// For `job.deleted`: when, and whether an object existed and was removed.
    pub deleted: Option<(DateTime<Utc>, bool)>,
}

/// `job.execution.<op>`: one execution's end.
#[derive(Debug, Clone, Copy)]
pub struct ExecutionBody<'a> {
    pub job_id: Uuid,
    pub datasource: &'a str,
    pub status: ExecutionStatus,
    pub row_count: u64,
    /// `{"error": "<redacted>"}` when it ended with one; omitted when empty.
    pub status_details: &'a Map<String, Value>,
    pub started_at: Option<DateTime<Utc>>,
    pub ended_at: Option<DateTime<Utc>>,
}

impl CancelBody<'_> {
    pub fn to_bytes(&self) -> Result<Vec<u8>, JsonError> {
        let mut w = job_head(self.job_id, self.metadata)?;
        let status = if self.canceled.is_some() {
            "canceled"
        } else {
            "cancellation_in_progress"
        };
        w.key("status")?;
        w.string(status)?;
        w.key("forceCanceled")?;
        w.bool(self.force)?;
        optional_string(&mut w, "comment", self.comment)?;
        optional_string(&mut w, "reasonCode", self.reason_code)?;
        if let Some((at, details)) = &self.canceled {
            w.key("canceledAt")?;
            w.string(&time(at))?;
            w.key("jobProcessDetails")?;
            w.begin_object()?;
            for (name, count) in details.members() {
                w.key(name)?;
                w.u64(count)?;
            }
            w.end_object()?;
        }
        w.end_object()?;
        w.finish()
    }
}

impl DeletionBody<'_> {
    pub fn to_bytes(&self) -> Result<Vec<u8>, JsonError> {
        let mut w = job_head(self.job_id, self.metadata)?;
        let status = if self.deleted.is_some() {
            "deleted"
        } else {
            "deletion_in_progress"
        };
        w.key("status")?;
        w.string(status)?;
        optional_string(&mut w, "comment", self.comment)?;
        if let Some((at, result_deleted)) = &self.deleted {
            w.key("deletedAt")?;
            w.string(&time(at))?;
            w.key("resultDeleted")?;
            w.bool(*result_deleted)?;
        }
        w.end_object()?;
        w.finish()
    }
}

impl ExecutionBody<'_> {
    pub fn to_bytes(&self) -> Result<Vec<u8>, JsonError> {
        let mut w = JsonWriter::new(Vec::with_capacity(256), Style::Compact);
        w.begin_object()?;
        w.key("jobId")?;
        w.string(&self.job_id.as_hyphenated().to_string())?;
        w.key("datasource")?;
        w.string(self.datasource)?;
        w.key("status")?;
        w.string(self.status.as_str())?;
        if self.row_count != 0 {
            w.key("rowCount")?;
            w.u64(self.row_count)?;
        }
        if !self.status_details.is_empty() {
            w.key("statusDetails")?;
            w.value(&Value::Object(self.status_details.clone()))?;
        }
        for (name, at) in [("startedAt", self.started_at), ("endedAt", self.ended_at)] {
            if let Some(at) = at {
                w.key(name)?;
                w.string(&time(&at))?;
            }
        }
        w.end_object()?;
        w.finish()
    }
}

/// `{"jobId":…,"metadata":…` of a job-level body.
fn job_head(job_id: Uuid, metadata: &Map<String, Value>) -> Result<JsonWriter<Vec<u8>>, JsonError> {
    let mut w = JsonWriter::new(Vec::with_capacity(512), Style::Compact);
    w.begin_object()?;
    w.key("jobId")?;
    w.string(&job_id.as_hyphenated().to_string())?;
    w.key("metadata")?;
    w.value(&Value::Object(metadata.clone()))?;
    Ok(w)
}

fn optional_string(
    w: &mut JsonWriter<Vec<u8>>,
    name: &str,
    value: Option<&str>,
) -> Result<(), JsonError> {
    if let Some(value) = value {
        w.key(name)?;
        w.string(value)?;
    }
    Ok(())
}

fn time(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn job() -> Uuid {
        Uuid::parse_str("6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88").unwrap()
    }

    fn at() -> DateTime<Utc> {
        Utc.timestamp_millis_opt(1_784_052_251_204)
            .single()
            .unwrap()
    }

    fn metadata() -> Map<String, Value> {
        let Value::Object(map) = json!({"source": "payments", "correlationId": "c-1"}) else {
            unreachable!()
        };
        map
    }

    #[test]
    fn cancel_bodies_are_written_member_for_member() {
        let metadata = metadata();
        let mut body = CancelBody {
            job_id: job(),
            metadata: &metadata,
            force: true,
            comment: Some("runaway <query>"),
            reason_code: Some("OPS_1"),
            canceled: None,
        };
        assert_eq!(
            String::from_utf8(body.to_bytes().unwrap()).unwrap(),
            r#"{"jobId":"6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88","metadata":{"correlationId":"c-1","source":"payments"},"status":"cancellation_in_progress","forceCanceled":true,"comment":"runaway \u003cquery\u003e","reasonCode":"OPS_1"}"#
        );
        body.comment = None;
        body.reason_code = None;
        body.force = false;
        body.canceled = Some((
            at(),
            JobProcessDetails::of([ExecutionStatus::Succeeded, ExecutionStatus::Canceled]),
        ));
        assert_eq!(
            String::from_utf8(body.to_bytes().unwrap()).unwrap(),
            r#"{"jobId":"6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88","metadata":{"correlationId":"c-1","source":"payments"},"status":"canceled","forceCanceled":false,"canceledAt":"2026-07-14T18:04:11.204Z","jobProcessDetails":{"numberOfQueuedThings":0,"numberOfInProgressThings":0,"numberOfSucceededThings":1,"numberOfFailedThings":0,"numberOfRejectedThings":0,"numberOfRemovedThings":0,"numberOfTimedOutThings":0,"numberOfCanceledThings":1}}"#
        );
    }

    #[test]
    fn deletion_bodies_are_written_member_for_member() {
        let metadata = Map::new();
        let mut body = DeletionBody {
            job_id: job(),
            metadata: &metadata,
            comment: Some("retention"),
            deleted: None,
        };
        assert_eq!(
            String::from_utf8(body.to_bytes().unwrap()).unwrap(),
            r#"{"jobId":"6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88","metadata":{},"status":"deletion_in_progress","comment":"retention"}"#
        );
        body.deleted = Some((at(), true));
        assert_eq!(
            String::from_utf8(body.to_bytes().unwrap()).unwrap(),
            r#"{"jobId":"6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88","metadata":{},"status":"deleted","comment":"retention","deletedAt":"2026-07-14T18:04:11.204Z","resultDeleted":true}"#
        );
    }

    #[test]
    fn execution_bodies_omit_zero_rows_empty_details_and_absent_times() {
        let details = Map::new();
        let rejected = ExecutionBody {
            job_id: job(),
            datasource: "ledger",
            status: ExecutionStatus::Rejected,
            row_count: 0,
            status_details: &details,
            started_at: None,
            ended_at: Some(at()),
        };
        assert_eq!(
            String::from_utf8(rejected.to_bytes().unwrap()).unwrap(),
            r#"{"jobId":"6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88","datasource":"ledger","status":"REJECTED","endedAt":"2026-07-14T18:04:11.204Z"}"#
        );
        let Value::Object(error) = json!({"error": "table missing"}) else {
            unreachable!()
        };
        let failed = ExecutionBody {
            status: ExecutionStatus::Failed,
            row_count: 1200,
            status_details: &error,
            started_at: Some(at()),
            ..rejected
        };
        assert_eq!(
            String::from_utf8(failed.to_bytes().unwrap()).unwrap(),
            r#"{"jobId":"6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88","datasource":"ledger","status":"FAILED","rowCount":1200,"statusDetails":{"error":"table missing"},"startedAt":"2026-07-14T18:04:11.204Z","endedAt":"2026-07-14T18:04:11.204Z"}"#
        );
    }
}

//! The MQTT mirror's messages (lifecycle §5), the shapes of AWS IoT Jobs' "Jobs events" page:
//! topics under a prefix that replaces `$aws`, and payloads member for member.
//!
//! Pure, like the AMQP bodies: the relay builds nothing, it publishes what was recorded. What is
//! here so far: the stable `eventId`, the topics, a job's `completed` payload (also for a job
//! that ended `failed`: in IoT terms all its executions reached a terminal state) and an
//! execution's payload. The cancel and deletion payloads are not built yet (issue 14).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::json::{JsonError, JsonWriter, Style};
use crate::lifecycle::{ExecutionStatus, JobProcessDetails};

use super::cloudevents::event_tenant;

/// An event's `eventId`: the UUID v5 of its `ce-id` in the URL namespace, so a republished event
/// keeps its id.
pub fn event_id(ce_id: &str) -> Uuid {
    Uuid::new_v5(&Uuid::NAMESPACE_URL, ce_id.as_bytes())
}

/// `<prefix>/events/job/<jobId>/<operation>`.
pub fn job_topic(prefix: &str, job_id: Uuid, operation: &str) -> String {
    format!("{prefix}/events/job/{}/{operation}", job_id.as_hyphenated())
}

/// `<prefix>/events/jobExecution/<jobId>/<operation>`.
pub fn execution_topic(prefix: &str, job_id: Uuid, operation: &str) -> String {
    format!(
        "{prefix}/events/jobExecution/{}/{operation}",
        job_id.as_hyphenated()
    )
}

/// A datasource as an IoT thing: `fetcher:<tenant>:datasource/<name>` (the event tenant:
/// `single-tenant` for a job without one).
pub fn thing_arn(tenant: Option<&str>, datasource: &str) -> String {
    format!("fetcher:{}:datasource/{datasource}", event_tenant(tenant))
}

/// `events/job/<jobId>/completed`: a job that ended `completed` or `failed`.
#[derive(Debug, Clone, Copy)]
pub struct JobCompleted<'a> {
    /// The `ce-id` of the AMQP event it mirrors (its `eventId` derives from it).
    pub ce_id: &'a str,
    pub job_id: Uuid,
    pub tenant: Option<&'a str>,
    /// The job's datasources, its targets.
    pub datasources: &'a [&'a str],
    /// `metadata.source`, if any.
    pub description: Option<&'a str>,
    /// When the event was recorded (`timestamp`, in seconds).
    pub at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub last_updated_at: DateTime<Utc>,
    pub completed_at: DateTime<Utc>,
    pub details: JobProcessDetails,
}

impl JobCompleted<'_> {
    pub fn to_bytes(&self) -> Result<Vec<u8>, JsonError> {
        let mut w = JsonWriter::new(Vec::with_capacity(512), Style::Compact);
        w.begin_object()?;
        head(&mut w, "JOB", self.ce_id, self.at, "completed", self.job_id)?;
        w.key("status")?;
        w.string("COMPLETED")?;
        w.key("targetSelection")?;
        w.string("SNAPSHOT")?;
        w.key("targets")?;
        w.begin_array()?;
        for datasource in self.datasources {
            w.string(&thing_arn(self.tenant, datasource))?;
        }
        w.end_array()?;
        if let Some(description) = self.description {
            w.key("description")?;
            w.string(description)?;
        }
        for (name, at) in [
            ("completedAt", self.completed_at),
            ("createdAt", self.created_at),
            ("lastUpdatedAt", self.last_updated_at),
        ] {
            w.key(name)?;
            w.i64(at.timestamp_millis())?;
        }
        w.key("jobProcessDetails")?;
        w.begin_object()?;
        for (name, count) in process_details(&self.details) {
            w.key(name)?;
            w.u64(count)?;
        }
        w.end_object()?;
        w.end_object()?;
        w.finish()
    }
}

/// The five counts of the page's example, in its order. Its example has no timed-out member: an
/// execution that timed out counts as failed, so a failed job's failure stays visible.
fn process_details(details: &JobProcessDetails) -> [(&'static str, u64); 5] {
    use ExecutionStatus as E;
    [
        ("numberOfCanceledThings", details.count(E::Canceled)),
        ("numberOfRejectedThings", details.count(E::Rejected)),
        (
            "numberOfFailedThings",
            details.count(E::Failed) + details.count(E::TimedOut),
        ),
        ("numberOfRemovedThings", details.count(E::Removed)),
        ("numberOfSucceededThings", details.count(E::Succeeded)),
    ]
}

/// `events/jobExecution/<jobId>/<operation>`: one execution's end (or deletion).
#[derive(Debug, Clone, Copy)]
pub struct ExecutionEvent<'a> {
    pub ce_id: &'a str,
    pub job_id: Uuid,
    pub tenant: Option<&'a str>,
    pub datasource: &'a str,
    /// `succeeded`, `failed`, `rejected`, `canceled`, `timed_out`, `removed` or `deleted`.
    pub operation: &'a str,
    pub status: ExecutionStatus,
    pub row_count: u64,
    /// The redacted error, when it ended with one.
    pub error: Option<&'a str>,
    pub at: DateTime<Utc>,
}

impl ExecutionEvent<'_> {
    pub fn to_bytes(&self) -> Result<Vec<u8>, JsonError> {
        let mut w = JsonWriter::new(Vec::with_capacity(384), Style::Compact);
        w.begin_object()?;
        head(
            &mut w,
            "JOB_EXECUTION",
            self.ce_id,
            self.at,
            self.operation,
            self.job_id,
        )?;
        w.key("thingArn")?;
        w.string(&thing_arn(self.tenant, self.datasource))?;
        w.key("status")?;
        w.string(self.status.as_str())?;
        // IoT's statusDetails map strings to strings.
        let mut details = Map::new();
        if self.row_count != 0 {
            details.insert("rowCount".into(), Value::String(self.row_count.to_string()));
        }
        if let Some(error) = self.error {
            details.insert("error".into(), Value::String(error.to_owned()));
        }
        w.key("statusDetails")?;
        w.value(&Value::Object(details))?;
        w.end_object()?;
        w.finish()
    }
}

/// `"eventType":…,"eventId":…,"timestamp":…,"operation":…,"jobId":…`.
fn head(
    w: &mut JsonWriter<Vec<u8>>,
    event_type: &str,
    ce_id: &str,
    at: DateTime<Utc>,
    operation: &str,
    job_id: Uuid,
) -> Result<(), JsonError> {
    w.key("eventType")?;
    w.string(event_type)?;
    w.key("eventId")?;
    w.string(&event_id(ce_id).as_hyphenated().to_string())?;
    w.key("timestamp")?;
    w.i64(at.timestamp())?;
    w.key("operation")?;
    w.string(operation)?;
    w.key("jobId")?;
    w.string(&job_id.as_hyphenated().to_string())
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    const JOB: &str = "6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88";

    fn ms(millis: i64) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(millis).single().expect("time")
    }

    #[test]
    fn the_event_id_is_the_url_namespace_uuid_v5_of_the_ce_id() {
        let ce_id = format!("fetcher.job.completed.{JOB}");
        let id = event_id(&ce_id);
        // Python's `uuid.uuid5(uuid.NAMESPACE_URL, ce_id)`, an implementation not ours.
        assert_eq!(id.to_string(), "3e50f496-3424-5d5c-a031-2380c0354492");
        assert_eq!(id.get_version_num(), 5);
        assert_eq!(id, event_id(&ce_id), "stable across republishes");
        assert_ne!(id, event_id(&format!("fetcher.job.failed.{JOB}")));
    }

    #[test]
    fn topics_replace_the_reserved_prefix() {
        let job = Uuid::parse_str(JOB).unwrap();
        assert_eq!(
            job_topic("fetcher", job, "cancellation_in_progress"),
            format!("fetcher/events/job/{JOB}/cancellation_in_progress")
        );
        assert_eq!(
            execution_topic("ops/fetcher", job, "timed_out"),
            format!("ops/fetcher/events/jobExecution/{JOB}/timed_out")
        );
    }

    #[test]
    fn a_completed_payload_has_the_pages_members_in_order_with_their_number_types() {
        let job = Uuid::parse_str(JOB).unwrap();
        let ce_id = format!("fetcher.job.completed.{JOB}");
        let payload = JobCompleted {
            ce_id: &ce_id,
            job_id: job,
            tenant: None,
            datasources: &["ledger"],
            description: Some("payments"),
            at: ms(1_234_567_890_999),
            created_at: ms(1_234_567_890_123),
            last_updated_at: ms(1_234_567_890_124),
            completed_at: ms(1_234_567_890_125),
            details: JobProcessDetails::of([ExecutionStatus::Succeeded]),
        }
        .to_bytes()
        .unwrap();
        let expected = format!(
            r#"{{"eventType":"JOB","eventId":"3e50f496-3424-5d5c-a031-2380c0354492","timestamp":1234567890,"operation":"completed","jobId":"{JOB}","status":"COMPLETED","targetSelection":"SNAPSHOT","targets":["fetcher:single-tenant:datasource/ledger"],"description":"payments","completedAt":1234567890125,"createdAt":1234567890123,"lastUpdatedAt":1234567890124,"jobProcessDetails":{{"numberOfCanceledThings":0,"numberOfRejectedThings":0,"numberOfFailedThings":0,"numberOfRemovedThings":0,"numberOfSucceededThings":1}}}}"#
        );
        assert_eq!(String::from_utf8(payload).unwrap(), expected);
    }

    #[test]
    fn a_failed_job_is_completed_with_its_failure_in_the_counts() {
        use ExecutionStatus as E;
        let job = Uuid::parse_str(JOB).unwrap();
        let payload = JobCompleted {
            ce_id: "fetcher.job.failed.x",
            job_id: job,
            tenant: Some("acme"),
            datasources: &["crm", "ledger", "vault"],
            description: None,
            at: ms(0),
            created_at: ms(0),
            last_updated_at: ms(0),
            completed_at: ms(0),
            details: JobProcessDetails::of([E::TimedOut, E::Canceled, E::Rejected]),
        }
        .to_bytes()
        .unwrap();
        let value: Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(value["status"], "COMPLETED");
        assert!(
            value.get("description").is_none(),
            "absent without a source"
        );
        assert_eq!(value["targets"][2], "fetcher:acme:datasource/vault");
        let details = &value["jobProcessDetails"];
        assert_eq!(details["numberOfFailedThings"], 1, "the timed-out one");
        assert_eq!(details["numberOfCanceledThings"], 1);
        assert_eq!(details["numberOfRejectedThings"], 1);
        assert_eq!(details["numberOfSucceededThings"], 0);
    }

    #[test]
    fn an_execution_payload_has_string_valued_status_details() {
        let job = Uuid::parse_str(JOB).unwrap();
        let ce_id = format!("fetcher.job.execution.failed.{JOB}.ledger");
        let payload = ExecutionEvent {
            ce_id: &ce_id,
            job_id: job,
            tenant: Some("acme"),
            datasource: "ledger",
            operation: "failed",
            status: ExecutionStatus::Failed,
            row_count: 1200,
            error: Some("query on datasource ledger failed: boom"),
            at: ms(1_700_000_000_500),
        }
        .to_bytes()
        .unwrap();
        let expected = format!(
            r#"{{"eventType":"JOB_EXECUTION","eventId":"{}","timestamp":1700000000,"operation":"failed","jobId":"{JOB}","thingArn":"fetcher:acme:datasource/ledger","status":"FAILED","statusDetails":{{"error":"query on datasource ledger failed: boom","rowCount":"1200"}}}}"#,
            event_id(&ce_id)
        );
        assert_eq!(String::from_utf8(payload).unwrap(), expected);
    }
}

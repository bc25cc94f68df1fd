//! The MQTT mirror's messages (lifecycle §5), the shapes of AWS IoT Jobs' "Jobs events" page:
//! topics under a prefix that replaces `$aws`, and payloads member for member.
//!
//! Pure, like the AMQP bodies: [`MirrorMessage::of`] builds an event's MQTT copy from the AMQP
//! event it mirrors and the job's facts at recording time ([`JobFacts`]); the outbox records both
//! in one transaction and the relay publishes what was recorded.
//!
//! - A job's event: `completed` (also for a job that ended `failed`: in IoT terms all its
//!   executions reached a terminal state, and the failure shows in `jobProcessDetails`),
//!   `canceled`, `deleted`, `cancellation_in_progress`, `deletion_in_progress`; the last four
//!   without `completedAt` and `jobProcessDetails`, with `comment` when the request had one.
//! - An execution's event: `thingArn`, its status, string-valued `statusDetails`.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::json::{JsonError, JsonWriter, Style};
use crate::lifecycle::{ExecutionStatus, JobProcessDetails};

use super::{Operation, OutboundEvent};

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

/// A datasource as an IoT thing: `fetcher:<tenant>:datasource/<name>`, with the event's tenant
/// (`single-tenant` for a job without one).
pub fn thing_arn(event_tenant: &str, datasource: &str) -> String {
    format!("fetcher:{event_tenant}:datasource/{datasource}")
}

/// Whether `prefix` can lead the mirror's topics: not empty, no `$` (broker-reserved), no
/// wildcard (`+`, `#`), no NUL, no empty level, at most 1,024 bytes.
pub fn valid_prefix(prefix: &str) -> Result<(), &'static str> {
    if prefix.is_empty() {
        return Err("is empty");
    }
    if prefix.len() > 1024 {
        return Err("is longer than 1024 bytes");
    }
    if prefix.contains(['$', '+', '#', '\0']) {
        return Err("holds `$`, a wildcard (`+`, `#`) or NUL");
    }
    if prefix.split('/').any(str::is_empty) {
        return Err("has an empty level (a leading, trailing or doubled `/`)");
    }
    Ok(())
}

/// What the mirror reports of a job besides the AMQP event itself, read from the job's state row
/// in the transaction that records the event. (`Default`: none, for an execution's event, whose
/// payload needs none.)
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFacts {
    /// The job's datasources, its targets, in order.
    pub datasources: Vec<String>,
    /// `metadata.source`, if any: the payload's `description`.
    pub description: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_updated_at: DateTime<Utc>,
    /// When it ended (`completedAt` of a `completed` payload).
    pub finished_at: Option<DateTime<Utc>>,
    /// Its executions' statuses, counted.
    pub details: JobProcessDetails,
}

/// One MQTT message of the mirror: where it goes and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorMessage {
    pub topic: String,
    pub payload: Vec<u8>,
}

/// Why an event has no MQTT copy: its recorded parts do not read as an event of ours.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error("the event's body is not a JSON object")]
    Body,
    #[error("the event's time `{0}` is not RFC 3339")]
    Time(String),
    #[error("the event's subject `{0}` is not a job id")]
    Subject(String),
    #[error("an execution event's body has no status")]
    Status,
    #[error(transparent)]
    Json(#[from] JsonError),
}

impl MirrorMessage {
    /// The MQTT copy of `event`, under `prefix`, with `facts` of its job.
    pub fn of(
        prefix: &str,
        event: &OutboundEvent,
        facts: &JobFacts,
    ) -> Result<MirrorMessage, MirrorError> {
        let attributes = &event.attributes;
        let job_id = Uuid::parse_str(&attributes.subject)
            .map_err(|_| MirrorError::Subject(attributes.subject.clone()))?;
        let at = DateTime::parse_from_rfc3339(&attributes.time)
            .map_err(|_| MirrorError::Time(attributes.time.clone()))?
            .with_timezone(&Utc);
        let body: Map<String, Value> =
            serde_json::from_slice(&event.body).map_err(|_| MirrorError::Body)?;
        let tenant = attributes.tenant.as_str();
        let operation = attributes.status;
        if let Some(datasource) = attributes.datasource.as_deref() {
            let status = body
                .get("status")
                .and_then(Value::as_str)
                .ok_or(MirrorError::Status)?;
            let payload = ExecutionEvent {
                ce_id: &attributes.id,
                job_id,
                thing_arn: &thing_arn(tenant, datasource),
                operation: operation.as_str(),
                status,
                status_details: &status_details(&body),
                at,
            }
            .to_bytes()?;
            return Ok(MirrorMessage {
                topic: execution_topic(prefix, job_id, operation.as_str()),
                payload,
            });
        }
        let kind = JobOperation::of(operation);
        let targets: Vec<String> = facts
            .datasources
            .iter()
            .map(|datasource| thing_arn(tenant, datasource))
            .collect();
        let completed = match kind {
            JobOperation::Completed => Some((facts.finished_at.unwrap_or(at), facts.details)),
            _ => None,
        };
        let payload = JobEvent {
            ce_id: &attributes.id,
            job_id,
            operation: kind,
            targets: &targets,
            description: facts.description.as_deref(),
            at,
            created_at: facts.created_at,
            last_updated_at: facts.last_updated_at,
            completed,
            comment: body.get("comment").and_then(Value::as_str),
        }
        .to_bytes()?;
        Ok(MirrorMessage {
            topic: job_topic(prefix, job_id, kind.topic()),
            payload,
        })
    }
}

/// An execution's `statusDetails`, string-valued as IoT's: `rowCount` when rows were read, then
/// the AMQP body's own details (`error`), each value as a string.
fn status_details(body: &Map<String, Value>) -> Map<String, Value> {
    let mut details = Map::new();
    if let Some(rows) = body.get("rowCount").and_then(Value::as_u64) {
        if rows != 0 {
            details.insert("rowCount".into(), Value::String(rows.to_string()));
        }
    }
    if let Some(Value::Object(own)) = body.get("statusDetails") {
        for (key, value) in own {
            let text = match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            };
            details.insert(key.clone(), Value::String(text));
        }
    }
    details
}

/// A job event's operation as the mirror names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobOperation {
    /// `completed` or `failed`.
    Completed,
    Canceled,
    Deleted,
    CancellationInProgress,
    DeletionInProgress,
}

impl JobOperation {
    /// The mirror's name for a job-level `operation` (an execution's operations never reach
    /// here; one that did would read as `completed`).
    pub fn of(operation: Operation) -> JobOperation {
        match operation {
            Operation::Canceled => JobOperation::Canceled,
            Operation::Deleted => JobOperation::Deleted,
            Operation::CancellationInProgress => JobOperation::CancellationInProgress,
            Operation::DeletionInProgress => JobOperation::DeletionInProgress,
            _ => JobOperation::Completed,
        }
    }

    /// The topic's last level and the payload's `operation`.
    pub fn topic(self) -> &'static str {
        match self {
            JobOperation::Completed => "completed",
            JobOperation::Canceled => "canceled",
            JobOperation::Deleted => "deleted",
            JobOperation::CancellationInProgress => "cancellation_in_progress",
            JobOperation::DeletionInProgress => "deletion_in_progress",
        }
    }

    /// The payload's `status`, as the page's examples write it.
    pub fn status(self) -> &'static str {
        match self {
            JobOperation::Completed => "COMPLETED",
            JobOperation::Canceled => "CANCELED",
            JobOperation::Deleted => "DELETED",
            JobOperation::CancellationInProgress => "CANCELLATION_IN_PROGRESS",
            JobOperation::DeletionInProgress => "DELETION_IN_PROGRESS",
        }
    }
}

/// `events/job/<jobId>/<operation>`.
#[derive(Debug, Clone, Copy)]
pub struct JobEvent<'a> {
    /// The `ce-id` of the AMQP event it mirrors (its `eventId` derives from it).
    pub ce_id: &'a str,
    pub job_id: Uuid,
    pub operation: JobOperation,
    /// The thing ARNs of the job's datasources.
    pub targets: &'a [String],
    /// `metadata.source`, if any.
    pub description: Option<&'a str>,
    /// When the event was recorded (`timestamp`, in seconds).
    pub at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub last_updated_at: DateTime<Utc>,
    /// `completedAt` and the counts: a `completed` payload's only.
    pub completed: Option<(DateTime<Utc>, JobProcessDetails)>,
    /// The cancel's or delete's comment (not in a `completed` payload).
    pub comment: Option<&'a str>,
}

impl JobEvent<'_> {
    pub fn to_bytes(&self) -> Result<Vec<u8>, JsonError> {
        let mut w = JsonWriter::new(Vec::with_capacity(512), Style::Compact);
        w.begin_object()?;
        head(
            &mut w,
            "JOB",
            self.ce_id,
            self.at,
            self.operation.topic(),
            self.job_id,
        )?;
        w.key("status")?;
        w.string(self.operation.status())?;
        w.key("targetSelection")?;
        w.string("SNAPSHOT")?;
        w.key("targets")?;
        w.begin_array()?;
        for target in self.targets {
            w.string(target)?;
        }
        w.end_array()?;
        if let Some(description) = self.description {
            w.key("description")?;
            w.string(description)?;
        }
        if let Some((completed_at, _)) = self.completed {
            w.key("completedAt")?;
            w.i64(completed_at.timestamp_millis())?;
        }
        for (name, at) in [
            ("createdAt", self.created_at),
            ("lastUpdatedAt", self.last_updated_at),
        ] {
            w.key(name)?;
            w.i64(at.timestamp_millis())?;
        }
        match (self.completed, self.comment) {
            (Some((_, details)), _) => {
                w.key("jobProcessDetails")?;
                w.begin_object()?;
                for (name, count) in process_details(&details) {
                    w.key(name)?;
                    w.u64(count)?;
                }
                w.end_object()?;
            }
            (None, Some(comment)) => {
                w.key("comment")?;
                w.string(comment)?;
            }
            (None, None) => {}
        }
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
    pub thing_arn: &'a str,
    /// `succeeded`, `failed`, `rejected`, `canceled`, `timed_out`, `removed` or `deleted`.
    pub operation: &'a str,
    /// The upper-case execution status.
    pub status: &'a str,
    /// String-valued.
    pub status_details: &'a Map<String, Value>,
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
        w.string(self.thing_arn)?;
        w.key("status")?;
        w.string(self.status)?;
        w.key("statusDetails")?;
        w.value(&Value::Object(self.status_details.clone()))?;
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
    use crate::event::{CancelBody, CloudEventAttributes, DeletionBody, ExecutionBody};

    const JOB: &str = "6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88";

    fn job() -> Uuid {
        Uuid::parse_str(JOB).unwrap()
    }

    fn ms(millis: i64) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(millis).single().expect("time")
    }

    fn facts(details: JobProcessDetails) -> JobFacts {
        JobFacts {
            datasources: vec!["ledger".into()],
            description: Some("payments".into()),
            created_at: ms(1_234_567_890_123),
            last_updated_at: ms(1_234_567_890_124),
            finished_at: Some(ms(1_234_567_890_125)),
            details,
        }
    }

    fn event(operation: Operation, tenant: Option<&str>, body: Vec<u8>) -> OutboundEvent {
        OutboundEvent {
            attributes: CloudEventAttributes::new(
                operation,
                job(),
                "/fetcher",
                tenant,
                ms(1_234_567_890_999),
            ),
            request_id: None,
            body,
        }
    }

    fn text(message: &MirrorMessage) -> &str {
        std::str::from_utf8(&message.payload).unwrap()
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
        assert_eq!(
            job_topic("fetcher", job(), "cancellation_in_progress"),
            format!("fetcher/events/job/{JOB}/cancellation_in_progress")
        );
        assert_eq!(
            execution_topic("ops/fetcher", job(), "timed_out"),
            format!("ops/fetcher/events/jobExecution/{JOB}/timed_out")
        );
    }

    #[test]
    fn a_prefix_with_dollar_wildcards_or_empty_levels_is_refused() {
        for good in ["fetcher", "ops/fetcher", "a-b_c.d"] {
            assert!(valid_prefix(good).is_ok(), "{good}");
        }
        for bad in ["", "$aws", "a/+/b", "a/#", "/a", "a/", "a//b", "a\0b"] {
            assert!(valid_prefix(bad).is_err(), "{bad:?}");
        }
        assert!(valid_prefix(&"a".repeat(1025)).is_err());
    }

    #[test]
    fn a_completed_payload_has_the_pages_members_in_order_with_their_number_types() {
        let body = br#"{"jobId":"x","status":"completed"}"#.to_vec();
        let message = MirrorMessage::of(
            "fetcher",
            &event(Operation::Completed, None, body),
            &facts(JobProcessDetails::of([ExecutionStatus::Succeeded])),
        )
        .unwrap();
        assert_eq!(message.topic, format!("fetcher/events/job/{JOB}/completed"));
        let expected = format!(
            r#"{{"eventType":"JOB","eventId":"3e50f496-3424-5d5c-a031-2380c0354492","timestamp":1234567890,"operation":"completed","jobId":"{JOB}","status":"COMPLETED","targetSelection":"SNAPSHOT","targets":["fetcher:single-tenant:datasource/ledger"],"description":"payments","completedAt":1234567890125,"createdAt":1234567890123,"lastUpdatedAt":1234567890124,"jobProcessDetails":{{"numberOfCanceledThings":0,"numberOfRejectedThings":0,"numberOfFailedThings":0,"numberOfRemovedThings":0,"numberOfSucceededThings":1}}}}"#
        );
        assert_eq!(text(&message), expected);
    }

    #[test]
    fn a_failed_job_is_completed_with_its_failure_in_the_counts() {
        use ExecutionStatus as E;
        let mut facts = facts(JobProcessDetails::of([
            E::TimedOut,
            E::Canceled,
            E::Rejected,
        ]));
        facts.datasources = vec!["crm".into(), "ledger".into(), "vault".into()];
        facts.description = None;
        let body = br#"{"jobId":"x","status":"failed","error":"boom"}"#.to_vec();
        let message = MirrorMessage::of(
            "fetcher",
            &event(Operation::Failed, Some("acme"), body),
            &facts,
        )
        .unwrap();
        assert_eq!(message.topic, format!("fetcher/events/job/{JOB}/completed"));
        let value: Value = serde_json::from_slice(&message.payload).unwrap();
        assert_eq!(value["status"], "COMPLETED");
        assert_eq!(value["operation"], "completed");
        assert_eq!(
            value["eventId"],
            event_id(&format!("fetcher.job.failed.{JOB}")).to_string(),
            "its own ce-id's"
        );
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
    fn cancel_and_deletion_payloads_have_no_completion_and_carry_the_comment() {
        let metadata = Map::new();
        let cancel = |canceled| CancelBody {
            job_id: job(),
            metadata: &metadata,
            force: false,
            comment: Some("runaway <query>"),
            reason_code: None,
            canceled,
        };
        let deletion = |deleted| DeletionBody {
            job_id: job(),
            metadata: &metadata,
            comment: None,
            deleted,
        };
        let details = JobProcessDetails::of([ExecutionStatus::Canceled]);
        let cases = [
            (
                Operation::CancellationInProgress,
                cancel(None).to_bytes().unwrap(),
                "CANCELLATION_IN_PROGRESS",
                r#","comment":"runaway \u003cquery\u003e"}"#,
            ),
            (
                Operation::Canceled,
                cancel(Some((ms(5), details))).to_bytes().unwrap(),
                "CANCELED",
                r#","comment":"runaway \u003cquery\u003e"}"#,
            ),
            (
                Operation::DeletionInProgress,
                deletion(None).to_bytes().unwrap(),
                "DELETION_IN_PROGRESS",
                r#","lastUpdatedAt":1234567890124}"#,
            ),
            (
                Operation::Deleted,
                deletion(Some((ms(5), true))).to_bytes().unwrap(),
                "DELETED",
                r#","lastUpdatedAt":1234567890124}"#,
            ),
        ];
        for (operation, body, status, tail) in cases {
            let message =
                MirrorMessage::of("fetcher", &event(operation, None, body), &facts(details))
                    .unwrap();
            let op = operation.as_str();
            assert_eq!(message.topic, format!("fetcher/events/job/{JOB}/{op}"));
            let expected_head = format!(
                r#"{{"eventType":"JOB","eventId":"{}","timestamp":1234567890,"operation":"{op}","jobId":"{JOB}","status":"{status}","targetSelection":"SNAPSHOT","targets":["fetcher:single-tenant:datasource/ledger"],"description":"payments","createdAt":1234567890123,"lastUpdatedAt":1234567890124"#,
                event_id(&format!("fetcher.job.{op}.{JOB}"))
            );
            let payload = text(&message);
            assert!(payload.starts_with(&expected_head), "{payload}");
            assert!(payload.ends_with(tail), "{payload}");
            assert!(!payload.contains("completedAt") && !payload.contains("jobProcessDetails"));
        }
    }

    #[test]
    fn an_execution_payload_has_string_valued_status_details() {
        let mut error = Map::new();
        error.insert(
            "error".into(),
            Value::String("query on datasource ledger failed: boom".into()),
        );
        let body = ExecutionBody {
            job_id: job(),
            datasource: "ledger",
            status: ExecutionStatus::Failed,
            row_count: 1200,
            status_details: &error,
            started_at: Some(ms(1_700_000_000_000)),
            ended_at: Some(ms(1_700_000_000_500)),
        }
        .to_bytes()
        .unwrap();
        let event = OutboundEvent {
            attributes: CloudEventAttributes::execution(
                Operation::Failed,
                job(),
                "ledger",
                "/fetcher",
                Some("acme"),
                ms(1_700_000_000_500),
            ),
            request_id: None,
            body,
        };
        let message =
            MirrorMessage::of("fetcher", &event, &facts(JobProcessDetails::default())).unwrap();
        assert_eq!(
            message.topic,
            format!("fetcher/events/jobExecution/{JOB}/failed")
        );
        let expected = format!(
            r#"{{"eventType":"JOB_EXECUTION","eventId":"{}","timestamp":1700000000,"operation":"failed","jobId":"{JOB}","thingArn":"fetcher:acme:datasource/ledger","status":"FAILED","statusDetails":{{"error":"query on datasource ledger failed: boom","rowCount":"1200"}}}}"#,
            event_id(&format!("fetcher.job.execution.failed.{JOB}.ledger"))
        );
        assert_eq!(text(&message), expected);
    }

    #[test]
    fn a_body_that_is_not_ours_is_an_error_not_a_panic() {
        let facts = facts(JobProcessDetails::default());
        let bad = event(Operation::Completed, None, b"not json".to_vec());
        assert!(matches!(
            MirrorMessage::of("fetcher", &bad, &facts),
            Err(MirrorError::Body)
        ));
        let mut late = event(Operation::Completed, None, b"{}".to_vec());
        late.attributes.time = "yesterday".into();
        assert!(matches!(
            MirrorMessage::of("fetcher", &late, &facts),
            Err(MirrorError::Time(_))
        ));
    }
}

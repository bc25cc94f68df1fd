//! CloudEvents 1.0 binary-mode attributes of a job event (contract §8).

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::json::GoTime;

use super::Operation;
#[cfg(test)]
use super::TerminalStatus;

/// `ce-tenantid` (and `X-Tenant-ID`) of an event whose job has no tenant.
pub const SINGLE_TENANT: &str = "single-tenant";

/// The header of the CloudEvents distributed tracing extension's `traceparent` attribute.
pub const TRACEPARENT_HEADER: &str = "ce-traceparent";

/// The ce-id of a job's event: `fetcher.job.<operation>.<jobId>` (`fetcher.job.completed.…`
/// for its terminal event). Deterministic, so it is the consumers' deduplication key across
/// republishes.
pub fn ce_id(operation: impl Into<Operation>, job_id: Uuid) -> String {
    format!(
        "fetcher.job.{}.{}",
        operation.into().as_str(),
        job_id.as_hyphenated()
    )
}

/// The ce-id of an execution's event: `fetcher.job.execution.<operation>.<jobId>.<datasource>`.
pub fn execution_ce_id(operation: Operation, job_id: Uuid, datasource: &str) -> String {
    format!(
        "fetcher.job.execution.{}.{}.{datasource}",
        operation.as_str(),
        job_id.as_hyphenated()
    )
}

/// The event tenant: the job's tenant, or [`SINGLE_TENANT`] when it has none (or an empty one).
pub fn event_tenant(tenant: Option<&str>) -> &str {
    match tenant {
        Some(t) if !t.is_empty() => t,
        _ => SINGLE_TENANT,
    }
}

/// The attributes of one event. They are frozen with the event body when the terminal state is
/// recorded, so a republish carries the same ones.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CloudEventAttributes {
    pub id: String,
    pub source: String,
    /// The `ce-eventtype` (the field keeps its first name: rows recorded before the lifecycle
    /// hold `"status":"completed"` or `"failed"`).
    pub status: Operation,
    /// The datasource of an execution's event (`job.execution.*`); absent for a job's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datasource: Option<String>,
    /// RFC 3339 UTC as Go writes a `time.Time` (up to nine fraction digits, trailing zeros
    /// trimmed). Rows recorded before kept three digits; they are relayed as recorded.
    pub time: String,
    /// The job id.
    pub subject: String,
    pub tenant: String,
    /// The W3C trace context of the run that recorded the event (the CloudEvents distributed
    /// tracing extension, header `ce-traceparent`), when the Worker's traces are on; absent
    /// otherwise, so the event is byte for byte what it was without traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

impl CloudEventAttributes {
    /// The attributes of `job_id`'s `operation` event (a terminal status or a lifecycle step),
    /// from `STREAMING_CLOUDEVENTS_SOURCE`.
    pub fn new(
        operation: impl Into<Operation>,
        job_id: Uuid,
        source: &str,
        tenant: Option<&str>,
        time: DateTime<Utc>,
    ) -> CloudEventAttributes {
        let operation = operation.into();
        CloudEventAttributes {
            id: ce_id(operation, job_id),
            source: source.to_owned(),
            status: operation,
            datasource: None,
            time: GoTime::from(time).to_string(),
            subject: job_id.as_hyphenated().to_string(),
            tenant: event_tenant(tenant).to_owned(),
            traceparent: None,
        }
    }

    /// The attributes of the event of `job_id`'s execution on `datasource`.
    pub fn execution(
        operation: Operation,
        job_id: Uuid,
        datasource: &str,
        source: &str,
        tenant: Option<&str>,
        time: DateTime<Utc>,
    ) -> CloudEventAttributes {
        CloudEventAttributes {
            id: execution_ce_id(operation, job_id, datasource),
            datasource: Some(datasource.to_owned()),
            ..CloudEventAttributes::new(operation, job_id, source, tenant, time)
        }
    }

    /// The extension attributes' headers (`ce-traceparent`), after [`headers`](Self::headers).
    pub fn extension_headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        self.traceparent
            .as_deref()
            .map(|traceparent| (TRACEPARENT_HEADER, traceparent))
            .into_iter()
    }

    /// `job.<operation>`, or `job.execution.<operation>`.
    pub fn routing_key(&self) -> &'static str {
        self.status.routing_key(self.is_execution())
    }

    /// Whether this is an execution's event (`job.execution.*`), not a job's.
    pub fn is_execution(&self) -> bool {
        self.datasource.is_some()
    }

    /// `job`, or `job_execution`.
    pub fn resource_type(&self) -> &'static str {
        if self.is_execution() {
            "job_execution"
        } else {
            "job"
        }
    }

    /// Every `ce-*` header with its value, in the contract's order. The publisher sends each
    /// value as an AMQP byte array.
    pub fn headers(&self) -> [(&'static str, &str); 11] {
        [
            ("ce-specversion", "1.0"),
            ("ce-id", &self.id),
            ("ce-source", &self.source),
            ("ce-type", self.status.ce_type(self.is_execution())),
            ("ce-time", &self.time),
            ("ce-subject", &self.subject),
            ("ce-resourcetype", self.resource_type()),
            ("ce-eventtype", self.status.as_str()),
            ("ce-schemaversion", "1.0.0"),
            ("ce-datacontenttype", "application/json"),
            ("ce-tenantid", &self.tenant),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn job() -> Uuid {
        Uuid::parse_str("6A5B0F8C-2F1E-4A41-9F0E-3D2C1B0A9E88").expect("uuid")
    }

    #[test]
    fn ce_id_is_deterministic_and_lowercase() {
        let id = ce_id(TerminalStatus::Completed, job());
        assert_eq!(
            id,
            "fetcher.job.completed.6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88"
        );
        assert_eq!(id, ce_id(TerminalStatus::Completed, job()));
        assert_ne!(id, ce_id(TerminalStatus::Failed, job()));
    }

    #[test]
    fn job_without_tenant_is_single_tenant() {
        let time = Utc
            .with_ymd_and_hms(2026, 7, 13, 18, 4, 11)
            .single()
            .expect("time");
        for tenant in [None, Some("")] {
            let attrs =
                CloudEventAttributes::new(TerminalStatus::Failed, job(), "src", tenant, time);
            assert_eq!(attrs.tenant, SINGLE_TENANT);
        }
        let attrs =
            CloudEventAttributes::new(TerminalStatus::Failed, job(), "src", Some("acme"), time);
        assert_eq!(attrs.tenant, "acme");
    }

    #[test]
    fn headers_carry_every_attribute_of_the_contract() {
        let time = Utc
            .timestamp_millis_opt(1_784_052_251_204)
            .single()
            .expect("time");
        let attrs = CloudEventAttributes::new(
            TerminalStatus::Completed,
            job(),
            "//lerian/fetcher",
            None,
            time,
        );
        let headers = attrs.headers();
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .expect(name)
        };
        assert_eq!(get("ce-specversion"), "1.0");
        assert_eq!(
            get("ce-id"),
            "fetcher.job.completed.6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88"
        );
        assert_eq!(get("ce-source"), "//lerian/fetcher");
        assert_eq!(get("ce-type"), "studio.lerian.job.completed");
        assert_eq!(get("ce-time"), "2026-07-14T18:04:11.204Z");
        assert_eq!(get("ce-subject"), "6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88");
        assert_eq!(get("ce-resourcetype"), "job");
        assert_eq!(get("ce-eventtype"), "completed");
        assert_eq!(get("ce-schemaversion"), "1.0.0");
        assert_eq!(get("ce-datacontenttype"), "application/json");
        assert_eq!(get("ce-tenantid"), "single-tenant");
    }

    #[test]
    fn attributes_recorded_before_the_lifecycle_read_back_and_write_the_same() {
        // An outbox row of the previous release (tests/fixtures of the schema crate).
        let stored = r#"{"id": "fetcher.job.completed.5b8b71d2-28cb-4edb-88e6-3b3e4d00647c", "time": "2026-12-01T15:53:17.764Z", "source": "//lerian/fetcher/test", "status": "completed", "tenant": "single-tenant", "subject": "5b8b71d2-28cb-4edb-88e6-3b3e4d00647c"}"#;
        let attrs: CloudEventAttributes = serde_json::from_str(stored).expect("old row");
        assert_eq!(attrs.status, Operation::Completed);
        assert_eq!(attrs.datasource, None);
        assert_eq!(attrs.routing_key(), "job.completed");
        let written: serde_json::Value = serde_json::to_value(&attrs).unwrap();
        let old: serde_json::Value = serde_json::from_str(stored).unwrap();
        assert_eq!(written, old, "no new member in a job event's attributes");
    }

    #[test]
    fn a_traceparent_is_an_extension_header_and_absent_changes_nothing() {
        let time = Utc
            .timestamp_millis_opt(1_784_052_251_204)
            .single()
            .unwrap();
        let mut attrs =
            CloudEventAttributes::new(TerminalStatus::Completed, job(), "src", None, time);
        assert_eq!(attrs.extension_headers().count(), 0);
        let json = serde_json::to_value(&attrs).unwrap();
        assert!(json.get("traceparent").is_none(), "{json}");
        let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        attrs.traceparent = Some(traceparent.to_owned());
        assert_eq!(
            attrs.extension_headers().collect::<Vec<_>>(),
            vec![("ce-traceparent", traceparent)]
        );
        let back: CloudEventAttributes =
            serde_json::from_value(serde_json::to_value(&attrs).unwrap()).unwrap();
        assert_eq!(back, attrs);
    }

    #[test]
    fn lifecycle_and_execution_events_have_their_own_keys_types_and_ids() {
        let time = Utc
            .timestamp_millis_opt(1_784_052_251_204)
            .single()
            .unwrap();
        let canceled = CloudEventAttributes::new(
            crate::lifecycle::Event::Canceled,
            job(),
            "src",
            Some("acme"),
            time,
        );
        assert_eq!(
            canceled.id,
            "fetcher.job.canceled.6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88"
        );
        assert_eq!(canceled.routing_key(), "job.canceled");
        let headers = canceled.headers();
        assert!(headers.contains(&("ce-type", "studio.lerian.job.canceled")));
        assert!(headers.contains(&("ce-eventtype", "canceled")));
        assert!(headers.contains(&("ce-resourcetype", "job")));

        let execution = CloudEventAttributes::execution(
            Operation::TimedOut,
            job(),
            "ledger",
            "src",
            None,
            time,
        );
        assert_eq!(
            execution.id,
            "fetcher.job.execution.timed_out.6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88.ledger"
        );
        assert_eq!(execution.routing_key(), "job.execution.timed_out");
        let headers = execution.headers();
        assert!(headers.contains(&("ce-type", "studio.lerian.job.execution.timed_out")));
        assert!(headers.contains(&("ce-eventtype", "timed_out")));
        assert!(headers.contains(&("ce-resourcetype", "job_execution")));
        assert!(headers.contains(&("ce-subject", "6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88")));
        let json = serde_json::to_value(&execution).unwrap();
        assert_eq!(json["datasource"], "ledger");
        assert_eq!(json["status"], "timed_out");
        let back: CloudEventAttributes = serde_json::from_value(json).unwrap();
        assert_eq!(back, execution);
    }
}

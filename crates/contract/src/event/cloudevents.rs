//! CloudEvents 1.0 binary-mode attributes of a job event (contract §8).

use chrono::{DateTime, SecondsFormat, Utc};
use uuid::Uuid;

use super::TerminalStatus;

/// `ce-tenantid` (and `X-Tenant-ID`) of an event whose job has no tenant.
pub const SINGLE_TENANT: &str = "single-tenant";

/// The ce-id of a job's terminal event: `fetcher.job.<status>.<jobId>`. Deterministic, so it is
/// the consumers' deduplication key across republishes.
pub fn ce_id(status: TerminalStatus, job_id: Uuid) -> String {
    format!("fetcher.job.{}.{}", status.as_str(), job_id.as_hyphenated())
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
    pub status: TerminalStatus,
    /// RFC 3339 UTC, milliseconds.
    pub time: String,
    /// The job id.
    pub subject: String,
    pub tenant: String,
}

impl CloudEventAttributes {
    /// The attributes of `job_id`'s `status` event, from `STREAMING_CLOUDEVENTS_SOURCE`.
    pub fn new(
        status: TerminalStatus,
        job_id: Uuid,
        source: &str,
        tenant: Option<&str>,
        time: DateTime<Utc>,
    ) -> CloudEventAttributes {
        CloudEventAttributes {
            id: ce_id(status, job_id),
            source: source.to_owned(),
            status,
            time: time.to_rfc3339_opts(SecondsFormat::Millis, true),
            subject: job_id.as_hyphenated().to_string(),
            tenant: event_tenant(tenant).to_owned(),
        }
    }

    /// Every `ce-*` header with its value, in the contract's order. The publisher sends each
    /// value as an AMQP byte array.
    pub fn headers(&self) -> [(&'static str, &str); 11] {
        [
            ("ce-specversion", "1.0"),
            ("ce-id", &self.id),
            ("ce-source", &self.source),
            ("ce-type", self.status.ce_type()),
            ("ce-time", &self.time),
            ("ce-subject", &self.subject),
            ("ce-resourcetype", "job"),
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
}

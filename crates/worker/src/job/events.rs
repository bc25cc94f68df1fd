//! The terminal events of a job's outcomes, built once and frozen in the outbox.

use chrono::{DateTime, Utc};
use contract::event::{CloudEventAttributes, OutboundEvent, Outcome, StoredResult, TerminalStatus};
use contract::Redacted;
use serde_json::{Map, Value};
use uuid::Uuid;

/// Who the event is about and where it goes.
pub(crate) struct EventContext<'a> {
    pub job_id: Uuid,
    pub tenant: Option<&'a str>,
    pub request_id: Option<&'a str>,
    pub metadata: &'a Map<String, Value>,
    pub source: &'a str,
}

impl EventContext<'_> {
    pub(crate) fn completed(
        &self,
        result: &StoredResult,
        execution_time_ms: u64,
        at: DateTime<Utc>,
    ) -> anyhow::Result<OutboundEvent> {
        let outcome = Outcome::Completed {
            result,
            execution_time_ms,
            completed_at: at,
        };
        self.build(TerminalStatus::Completed, &outcome, at)
    }

    pub(crate) fn failed(
        &self,
        error: &Redacted,
        at: DateTime<Utc>,
    ) -> anyhow::Result<OutboundEvent> {
        self.build(TerminalStatus::Failed, &Outcome::Failed { error }, at)
    }

    fn build(
        &self,
        status: TerminalStatus,
        outcome: &Outcome<'_>,
        at: DateTime<Utc>,
    ) -> anyhow::Result<OutboundEvent> {
        let mut attributes =
            CloudEventAttributes::new(status, self.job_id, self.source, self.tenant, at);
        // The run's trace, for a consumer's trace to join (traces on only).
        attributes.traceparent = crate::traces::current_traceparent();
        Ok(OutboundEvent::new(
            self.job_id,
            self.metadata,
            outcome,
            attributes,
            self.request_id.map(str::to_owned),
        )?)
    }
}

//! A terminal event as it is frozen in the outbox and handed to the publisher.

use uuid::Uuid;

use super::{event_body, CloudEventAttributes, Outcome};
use crate::json::JsonError;

/// Everything a publish of one event needs, frozen when the terminal state is recorded: every
/// republish sends these exact body bytes and attributes (only the signature's `t` is fresh).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundEvent {
    pub attributes: CloudEventAttributes,
    /// Correlation id for `X-Request-Id` (the job message's, when it had one).
    pub request_id: Option<String>,
    /// The compact JSON body (contract §8).
    pub body: Vec<u8>,
}

impl OutboundEvent {
    /// Builds the event of a job's outcome.
    pub fn new(
        job_id: Uuid,
        metadata: &serde_json::Map<String, serde_json::Value>,
        outcome: &Outcome<'_>,
        attributes: CloudEventAttributes,
        request_id: Option<String>,
    ) -> Result<OutboundEvent, JsonError> {
        Ok(OutboundEvent {
            attributes,
            request_id,
            body: event_body(job_id, metadata, outcome)?,
        })
    }

    /// The deduplication key, `fetcher.job.<status>.<jobId>`.
    pub fn ce_id(&self) -> &str {
        &self.attributes.id
    }

    /// `job.<operation>` / `job.execution.<operation>`.
    pub fn routing_key(&self) -> &'static str {
        self.attributes.routing_key()
    }

    /// The tenant for `ce-tenantid`, `X-Tenant-ID` and the signature (`single-tenant` when none).
    pub fn tenant(&self) -> &str {
        &self.attributes.tenant
    }
}

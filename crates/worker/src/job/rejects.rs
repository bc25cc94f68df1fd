//! Deliveries that do not run: refused ones are dead-lettered with their job untouched; signed
//! ones that cannot run fail their job unrun, so the submitter learns why.

use contract::envelope::{Route, ScannedJobId};
use contract::message::{recover_job_id, JobIdMismatch};
use contract::Redacted;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::authenticate;
use super::core::{Disposition, JobCore};
use super::events::EventContext;
use super::finish::{finish, Ending, Finished};
use super::inbound::InboundHeaders;
use crate::metrics;

/// A message over `RABBITMQ_MAX_MESSAGE_BYTES` is dead-lettered unparsed. When its signature
/// holds (checked in place, the job id found by the shallow scan), its job fails too.
pub(super) async fn too_large(
    core: &JobCore,
    headers: &InboundHeaders<'_>,
    route: &Route<'_>,
    body: &[u8],
    signed_job_id: &ScannedJobId,
) -> Disposition {
    const REASON: &str = "message_too_large";
    metrics::rejected(REASON);
    let limit = core.settings.limits.max_message_bytes;
    let verified = authenticate::verify(
        core,
        headers,
        route,
        body,
        signed_job_id,
        &core.settings.verify,
    );
    let signed_job = match (verified, signed_job_id) {
        (Ok(_), ScannedJobId::Id(id)) => Uuid::parse_str(id).ok().filter(|id| !id.is_nil()),
        _ => None,
    };
    let Some(job_id) = signed_job else {
        tracing::warn!(
            reason = REASON,
            bytes = body.len(),
            limit,
            "Job message dead-lettered: it is larger than RABBITMQ_MAX_MESSAGE_BYTES."
        );
        return Disposition::DeadLetter(REASON);
    };
    tracing::warn!(%job_id, reason = REASON, bytes = body.len(), limit, "Job failed and its message dead-lettered: it is larger than RABBITMQ_MAX_MESSAGE_BYTES.");
    let message = Redacted::new(&format!(
        "invalid job message: the message is {} bytes, more than the {limit} bytes allowed",
        body.len()
    ));
    match fail_unrun(core, job_id, headers, &Map::new(), message).await {
        Disposition::Retry(cause) => Disposition::Retry(cause),
        _ => Disposition::DeadLetter(REASON),
    }
}

/// A body that cannot be used: fail its job when its id can be recovered, else drop it.
pub(super) async fn unusable(
    core: &JobCore,
    headers: &InboundHeaders<'_>,
    body: &[u8],
    error: &contract::MessageError,
) -> Disposition {
    metrics::rejected(error.code());
    let job_id = match recover_job_id(headers.job_id, body) {
        Ok(Some(job_id)) => job_id,
        Ok(None) => {
            tracing::warn!(reason = error.code(), %error, "Job message dropped: its body is unusable and holds no job id.");
            return Disposition::Ack;
        }
        Err(mismatch) => return job_id_header(mismatch),
    };
    tracing::warn!(%job_id, tenant = headers.tenant.unwrap_or(""), reason = error.code(), %error, "Job failed: its message body is unusable.");
    let message = Redacted::new(&format!("invalid job message: {error}"));
    fail_unrun(core, job_id, headers, &Map::new(), message).await
}

/// Ends `job_id` failed without running it and without a claim (the job is new, or its claim
/// lapsed); a live claim elsewhere keeps the job, and this copy is dropped. A job canceled
/// before this message ends `canceled` instead (lifecycle §3).
pub(super) async fn fail_unrun(
    core: &JobCore,
    job_id: Uuid,
    headers: &InboundHeaders<'_>,
    metadata: &Map<String, Value>,
    error: Redacted,
) -> Disposition {
    let publisher = core.owner();
    let ending = Ending::failed(
        EventContext {
            job_id,
            tenant: headers.tenant,
            request_id: headers.request_id,
            metadata,
            source: &core.settings.source,
        },
        &publisher,
        error,
    );
    match finish(core, ending).await {
        Finished::Recorded | Finished::NotOurs => Disposition::Ack,
        Finished::AlreadyTerminal => core.republish(job_id).await,
        Finished::OtherTenant => other_tenant(job_id),
        Finished::NotRecorded(cause, reason) => {
            tracing::warn!(%job_id, cause = cause.as_str(), %reason, "Could not record the job's failure; the message will be retried.");
            Disposition::Retry(cause)
        }
    }
}

/// The unsigned `jobId` header names another job than the signed body: dead-lettered, the job
/// untouched (a replayed message must not pick which job it fails).
pub(super) fn job_id_header(mismatch: JobIdMismatch) -> Disposition {
    const REASON: &str = "job_id_header_mismatch";
    metrics::rejected(REASON);
    tracing::warn!(job_id = %mismatch.body, reason = REASON, "Job message dead-lettered: its jobId header names another job than its body.");
    Disposition::DeadLetter(REASON)
}

/// The message's tenant is not the job's: dead-lettered, the job untouched (one tenant per job).
/// The state names no such job and never creates one (the Manager mode): refused, as the Go
/// Worker refuses a message whose job the Manager never created.
pub(super) fn unknown_job(job_id: Uuid) -> Disposition {
    const REASON: &str = "job_not_found";
    metrics::rejected(REASON);
    tracing::warn!(%job_id, reason = REASON, "Job message dead-lettered: the Manager has no such job.");
    Disposition::DeadLetter(REASON)
}

pub(super) fn other_tenant(job_id: Uuid) -> Disposition {
    const REASON: &str = "tenant_mismatch";
    metrics::rejected(REASON);
    tracing::warn!(%job_id, reason = REASON, "Job message dead-lettered: the job belongs to another tenant.");
    Disposition::DeadLetter(REASON)
}

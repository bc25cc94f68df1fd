//! One delivery, from headers to its disposition (contract §4's table of outcomes).

use std::time::Duration;

use chrono::Utc;
use contract::envelope::{self, Route, ScannedJobId, SignatureError, Verified, VerifyPolicy};
use contract::message::{check_header, recover_job_id, JobIdMismatch};
use contract::{JobMessage, Redacted};
use outbox::{Claim, ClaimRequest, JobSpec, Recorded, TerminalOutcome, TerminalRecord};
use serde_json::Map;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::events::EventContext;
use super::inbound::{Inbound, InboundHeaders};
use super::pipeline::{self, RunEnd};
use super::JobContext;
use crate::metrics;

/// What happens to a delivery once it is handled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Disposition {
    /// Done with: acknowledge.
    Ack,
    /// Refused (bad signature): reject without requeue, so it is dead-lettered.
    DeadLetter,
    /// A dependency was unreachable: give it back to the queue to be tried again.
    Retry,
}

/// The longest a delivery waits for another owner's claim to lapse before giving up on it.
const BUSY_WAIT_LIMIT: Duration = Duration::from_secs(300);

impl JobContext {
    /// Handles one job message. Never panics on input; every branch logs why it ended as it did.
    ///
    /// Nothing costly happens before the signature holds: the size is checked first, the signed
    /// job id is found by a shallow scan, the signature is computed over the body in place, and
    /// only then is the body parsed.
    ///
    /// Every log line of the delivery carries its `X-Request-Id` (and its job id, once known)
    /// from the `job` span.
    pub async fn handle(&self, message: &Inbound<'_>, stop: &CancellationToken) -> Disposition {
        let headers = message.headers;
        let span = tracing::info_span!(
            "job",
            request_id = headers.request_id.unwrap_or(""),
            tenant = headers.tenant.unwrap_or(""),
            job_id = tracing::field::Empty,
        );
        self.handle_delivery(message, stop).instrument(span).await
    }

    async fn handle_delivery(
        &self,
        message: &Inbound<'_>,
        stop: &CancellationToken,
    ) -> Disposition {
        let headers = message.headers;
        let route = Route {
            tenant: headers.signed_tenant(),
            exchange: message.exchange,
            routing_key: message.routing_key,
        };
        let body = message.body;
        let signed_job_id = envelope::scan_job_id(body);
        if body.len() > self.limits.max_message_bytes {
            return self.too_large(&headers, &route, body, &signed_job_id).await;
        }
        if let Err(disposition) = self
            .authenticate(&headers, &route, body, &signed_job_id)
            .await
        {
            return disposition;
        }

        let job = match JobMessage::parse(body) {
            Ok(job) => job,
            Err(error) => return self.unusable(&headers, body, &error).await,
        };
        tracing::Span::current().record("job_id", tracing::field::display(job.job_id));
        if let Err(mismatch) = check_header(headers.job_id, job.job_id) {
            return refuse_job_id_header(mismatch);
        }
        if let Err(error) = job.check_metadata_size(self.limits.max_metadata_bytes) {
            metrics::rejected(error.code());
            tracing::warn!(job_id = %job.job_id, reason = error.code(), %error, "Job failed: its metadata is too large for its events.");
            let message = Redacted::new(&format!("invalid job message: {error}"));
            return self
                .record_failure(job.job_id, &headers, &Map::new(), message)
                .await;
        }
        // A job over the limits fails before anything is stored or claimed for it.
        if let Err(error) = self.engine.check_limits(&job.mapped_fields) {
            metrics::rejected("limit_exceeded");
            tracing::warn!(job_id = %job.job_id, %error, "Job failed: it exceeds the engine's limits.");
            let message = Redacted::new(&error.to_string());
            return self
                .record_failure(job.job_id, &headers, &job.metadata, message)
                .await;
        }
        let digest = message_digest(body);
        self.run_job(&job, &headers, &digest, stop).await
    }

    /// Checks the signature; `Err` holds the disposition of a refused message, already logged.
    ///
    /// Freshness guards a job's first acceptance only. A signature older than the window is
    /// taken when it is otherwise valid and the job was already accepted, for the same tenant,
    /// from this very body (its digest is stored with the claim): a broker redelivery, a retry
    /// after an unreachable dependency or a Worker that died must not turn into a dead-lettered
    /// "stale" job. The state database is asked only once the MAC holds.
    async fn authenticate(
        &self,
        headers: &InboundHeaders<'_>,
        route: &Route<'_>,
        body: &[u8],
        signed_job_id: &ScannedJobId,
    ) -> Result<(), Disposition> {
        let verified = match self.verify(headers, route, body, signed_job_id, &self.verify) {
            Err(stale @ SignatureError::Stale { .. }) => {
                self.verify_redelivery(headers, route, body, signed_job_id, stale)
                    .await?
            }
            verified => verified,
        };
        match verified {
            Ok(Verified::V1) => Ok(()),
            Ok(Verified::LegacyBody) => {
                metrics::legacy_verified();
                Ok(())
            }
            Err(error) => {
                metrics::rejected(error.code());
                tracing::warn!(reason = error.code(), %error, "Job message dead-lettered: its signature was refused.");
                Err(Disposition::DeadLetter)
            }
        }
    }

    /// A stale signature on a later delivery of an accepted job: `Ok(Ok(_))` when the MAC holds
    /// and the body is the accepted one, `Ok(Err(stale))` when not, `Err(Retry)` when the state
    /// database cannot tell.
    async fn verify_redelivery(
        &self,
        headers: &InboundHeaders<'_>,
        route: &Route<'_>,
        body: &[u8],
        signed_job_id: &ScannedJobId,
        stale: SignatureError,
    ) -> Result<Result<Verified, SignatureError>, Disposition> {
        let ageless = VerifyPolicy {
            max_age_secs: i64::MAX,
            ..self.verify
        };
        let verified = match self.verify(headers, route, body, signed_job_id, &ageless) {
            Ok(verified) => verified,
            Err(error) => return Ok(Err(error)),
        };
        let job_id = match signed_job_id {
            ScannedJobId::Id(id) => Uuid::parse_str(id).ok(),
            ScannedJobId::TooLong => None,
        };
        let Some(job_id) = job_id else {
            return Ok(Err(stale));
        };
        match self
            .store
            .accepted_message_digest(job_id, headers.tenant)
            .await
        {
            Ok(Some(accepted)) if accepted == message_digest(body) => {
                metrics::stale_redelivery_accepted();
                tracing::info!(%job_id, %stale, "Redelivery of an accepted job taken despite its signature's age: its body is the accepted one.");
                Ok(Ok(verified))
            }
            Ok(_) => Ok(Err(stale)),
            Err(error) => {
                tracing::warn!(%job_id, %error, "Could not check a stale redelivery against its accepted job; the message will be retried.");
                Err(Disposition::Retry)
            }
        }
    }

    /// Checks the signature with the internal key; `signed_job_id` is the body's, scanned once.
    fn verify(
        &self,
        headers: &InboundHeaders<'_>,
        route: &Route<'_>,
        body: &[u8],
        signed_job_id: &ScannedJobId,
        policy: &VerifyPolicy,
    ) -> Result<Verified, SignatureError> {
        let keys = &self.keys;
        envelope::verify_scanned(
            &headers.signature,
            route,
            body,
            signed_job_id,
            policy,
            Utc::now().timestamp(),
            |parts, signature| keys.internal_hmac().verify_hex_parts(parts, signature),
        )
    }

    /// A message over `RABBITMQ_MAX_MESSAGE_BYTES` is dead-lettered unparsed. When its signature
    /// holds (checked in place, the job id found by the shallow scan), its job fails too, so the
    /// submitter learns why.
    async fn too_large(
        &self,
        headers: &InboundHeaders<'_>,
        route: &Route<'_>,
        body: &[u8],
        signed_job_id: &ScannedJobId,
    ) -> Disposition {
        const REASON: &str = "message_too_large";
        metrics::rejected(REASON);
        let limit = self.limits.max_message_bytes;
        let signed_job = match (
            self.verify(headers, route, body, signed_job_id, &self.verify),
            signed_job_id,
        ) {
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
            return Disposition::DeadLetter;
        };
        tracing::warn!(%job_id, reason = REASON, bytes = body.len(), limit, "Job failed and its message dead-lettered: it is larger than RABBITMQ_MAX_MESSAGE_BYTES.");
        let message = Redacted::new(&format!(
            "invalid job message: the message is {} bytes, more than the {limit} bytes allowed",
            body.len()
        ));
        match self
            .record_failure(job_id, headers, &Map::new(), message)
            .await
        {
            Disposition::Retry => Disposition::Retry,
            _ => Disposition::DeadLetter,
        }
    }

    /// A body that cannot be used: fail its job when its id can be recovered, else drop it.
    async fn unusable(
        &self,
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
            Err(mismatch) => return refuse_job_id_header(mismatch),
        };
        tracing::warn!(%job_id, tenant = headers.tenant.unwrap_or(""), reason = error.code(), %error, "Job failed: its message body is unusable.");
        let message = Redacted::new(&format!("invalid job message: {error}"));
        self.record_failure(job_id, headers, &Map::new(), message)
            .await
    }

    /// Records `job_id` failed without holding its claim (the job is new, or its claim lapsed).
    async fn record_failure(
        &self,
        job_id: Uuid,
        headers: &InboundHeaders<'_>,
        metadata: &Map<String, serde_json::Value>,
        error: Redacted,
    ) -> Disposition {
        let owner = self.owner();
        let events = EventContext {
            job_id,
            tenant: headers.tenant,
            request_id: headers.request_id,
            metadata,
            source: &self.source,
        };
        let Ok(event) = events.failed(&error, Utc::now()) else {
            return Disposition::Retry;
        };
        let record = TerminalRecord {
            job_id,
            owner: None,
            tenant: headers.tenant,
            outcome: TerminalOutcome::Failed { error },
            event: &event,
            publisher: &owner,
            lease: self.lease,
        };
        match self.store.record_terminal(&record).await {
            Ok(Recorded::Inserted { outbox_id }) => {
                metrics::job_finished("failed", Duration::ZERO);
                pipeline::publish_now(self, outbox_id, job_id, event, &owner).await;
                Disposition::Ack
            }
            Ok(Recorded::AlreadyTerminal { .. }) => self.republish(job_id).await,
            // A live claim runs this job from a valid message: this broken copy is dropped.
            Ok(Recorded::LostClaim) | Ok(Recorded::DuplicateEvent { .. }) => Disposition::Ack,
            Ok(Recorded::OtherTenant) => refuse_other_tenant(job_id),
            Err(error) => {
                tracing::warn!(%job_id, %error, "Could not record the job's failure; the message will be retried.");
                Disposition::Retry
            }
        }
    }

    async fn run_job(
        &self,
        job: &JobMessage,
        headers: &InboundHeaders<'_>,
        digest: &[u8; 32],
        stop: &CancellationToken,
    ) -> Disposition {
        let spec = JobSpec {
            mapped_fields: &job.mapped_fields,
            filters: &job.filters,
        };
        let waited_since = tokio::time::Instant::now();
        loop {
            let owner = self.owner();
            let claim = self
                .store
                .claim(&ClaimRequest {
                    job_id: job.job_id,
                    tenant: headers.tenant,
                    request_id: headers.request_id,
                    metadata: &job.metadata,
                    spec: Some(spec),
                    message_sha256: Some(digest),
                    owner: &owner,
                    lease: self.lease,
                })
                .await;
            match claim {
                Ok(Claim::Acquired { attempt }) => {
                    tracing::info!(job_id = %job.job_id, tenant = headers.tenant.unwrap_or(""), attempt, "Job claimed.");
                    return match pipeline::run(
                        self,
                        job,
                        headers.tenant,
                        headers.request_id,
                        &owner,
                        attempt,
                    )
                    .await
                    {
                        RunEnd::Recorded | RunEnd::LostClaim => Disposition::Ack,
                        RunEnd::Retry(reason) => {
                            tracing::warn!(job_id = %job.job_id, %reason, "Job interrupted by an unreachable dependency; the message will be retried.");
                            // The message's next delivery claims the job at once instead of
                            // waiting for this claim to lapse (if the database cannot be told
                            // now, it lapses by itself).
                            if let Err(error) = self.store.release(job.job_id, &owner).await {
                                tracing::debug!(job_id = %job.job_id, %error, "Could not release the job's claim; it will lapse.");
                            }
                            Disposition::Retry
                        }
                    };
                }
                Ok(Claim::Terminal {
                    event_published: true,
                    ..
                }) => {
                    tracing::info!(job_id = %job.job_id, "Job already finished; message acknowledged.");
                    return Disposition::Ack;
                }
                Ok(Claim::Terminal {
                    event_published: false,
                    ..
                }) => return self.republish(job.job_id).await,
                Ok(Claim::Busy { lease_expires_at }) => {
                    // Another owner holds the job. If it is alive it renews its lease and this
                    // copy is a duplicate; if it died, the lease lapses and this copy takes over.
                    let until_expiry = (lease_expires_at - Utc::now()).to_std().unwrap_or_default();
                    if waited_since.elapsed() > BUSY_WAIT_LIMIT {
                        tracing::info!(job_id = %job.job_id, "Job stays with its live owner; duplicate message acknowledged.");
                        return Disposition::Ack;
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(until_expiry + Duration::from_millis(250)) => {}
                        _ = stop.cancelled() => return Disposition::Retry,
                    }
                }
                Ok(Claim::OtherTenant) => return refuse_other_tenant(job.job_id),
                Err(error) if error.is_retriable() => {
                    tracing::warn!(job_id = %job.job_id, %error, "Could not claim the job; the message will be retried.");
                    return Disposition::Retry;
                }
                // The database refuses this job for good (a value it cannot store): retrying
                // would loop forever, so the job fails with the reason.
                Err(error) => {
                    tracing::warn!(job_id = %job.job_id, %error, "Job failed: the state database refuses it.");
                    let message = Redacted::new(&format!("the job cannot be recorded: {error}"));
                    return self
                        .record_failure(job.job_id, headers, &Map::new(), message)
                        .await;
                }
            }
        }
    }

    /// Publishes a finished job's events that were never published.
    async fn republish(&self, job_id: Uuid) -> Disposition {
        let owner = self.owner();
        match self.store.claim_for_job(job_id, &owner, self.lease).await {
            Ok(pending) => {
                if let Err(error) =
                    repairer::relay(&self.store, &self.publisher, &owner, &pending).await
                {
                    tracing::warn!(%job_id, %error, "Could not record the republish; the repairer will publish the event.");
                }
                Disposition::Ack
            }
            Err(error) => {
                tracing::warn!(%job_id, %error, "Could not lease the job's unpublished event; the repairer will publish it.");
                Disposition::Ack
            }
        }
    }

    /// A claim owner unique to this attempt.
    fn owner(&self) -> String {
        format!("{}/{}", self.worker_id, Uuid::new_v4().simple())
    }
}

/// The SHA-256 of a job message's body, kept with the job's claim.
fn message_digest(body: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(body).into()
}

/// The unsigned `jobId` header names another job than the signed body: dead-lettered, the job
/// untouched (a replayed message must not pick which job it fails).
fn refuse_job_id_header(mismatch: JobIdMismatch) -> Disposition {
    const REASON: &str = "job_id_header_mismatch";
    metrics::rejected(REASON);
    tracing::warn!(job_id = %mismatch.body, reason = REASON, "Job message dead-lettered: its jobId header names another job than its body.");
    Disposition::DeadLetter
}

/// The message's tenant is not the job's: dead-lettered, the job untouched (one tenant per job).
fn refuse_other_tenant(job_id: Uuid) -> Disposition {
    const REASON: &str = "tenant_mismatch";
    metrics::rejected(REASON);
    tracing::warn!(%job_id, reason = REASON, "Job message dead-lettered: the job belongs to another tenant.");
    Disposition::DeadLetter
}

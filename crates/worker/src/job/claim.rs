//! Taking a verified job for this delivery and running it, or learning that it ended, belongs
//! to another tenant or is held by another owner (contract §5).

use std::time::Duration;

use chrono::Utc;
use contract::{JobMessage, Redacted};
use outbox::{Claim, ClaimRequest, JobSpec};
use serde_json::Map;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;
use uuid::Uuid;

use super::cancel::{self, CancelEnd, Canceled};
use super::claimed::ClaimedRun;
use super::core::{Disposition, JobCore, Requeue};
use super::finish::Finished;
use super::inbound::InboundHeaders;
use super::rejects;
use super::spans::stage;

/// The longest a delivery waits for another owner's claim to lapse before giving up on it.
pub(super) const BUSY_WAIT_LIMIT: Duration = Duration::from_secs(300);

/// Claims the job and runs it. A job another owner holds is waited for while its lease may
/// lapse (then this delivery takes over), up to [`BUSY_WAIT_LIMIT`]; `stop` ends the wait.
pub(super) async fn claim_and_run(
    core: &JobCore,
    job: &JobMessage,
    headers: &InboundHeaders<'_>,
    digest: &[u8; 32],
    stop: &CancellationToken,
) -> Disposition {
    let spec = JobSpec {
        mapped_fields: &job.mapped_fields,
        filters: &job.filters,
    };
    let waited_since = Instant::now();
    // The delivery's trace (telemetry on), kept with the job for the events recorded outside
    // this run.
    let traceparent = crate::traces::current_traceparent();
    loop {
        let owner = core.owner();
        let claim = core
            .ports
            .jobs
            .claim(&ClaimRequest {
                job_id: job.job_id,
                tenant: headers.tenant,
                request_id: headers.request_id,
                metadata: &job.metadata,
                spec: Some(spec),
                message_sha256: Some(digest),
                timeout_seconds: job.timeout_seconds,
                owner: &owner,
                lease: core.settings.lease,
                traceparent: traceparent.as_deref(),
            })
            .instrument(stage!("claim"))
            .await;
        match claim {
            Ok(Claim::Acquired {
                attempt,
                running_for,
            }) => {
                tracing::info!(job_id = %job.job_id, tenant = headers.tenant.unwrap_or(""), attempt, "Job claimed.");
                if attempt > 1 {
                    // Its message came back and runs the job again: every datasource is read
                    // again, counted where the retries within a run are.
                    crate::metrics::datasource_retries(
                        crate::metrics::RetryOutcome::Redelivered,
                        u64::try_from(job.mapped_fields.len()).unwrap_or(u64::MAX),
                    );
                }
                let run = ClaimedRun {
                    job,
                    tenant: headers.tenant,
                    request_id: headers.request_id,
                    owner: &owner,
                    attempt,
                    running_for,
                };
                return match run.run(core).await {
                    Finished::NotRecorded(cause, reason) => {
                        tracing::warn!(job_id = %job.job_id, cause = cause.as_str(), %reason, "Job interrupted by an unreachable dependency; the message will be retried.");
                        release(core, job.job_id, &owner).await;
                        Disposition::Retry(cause)
                    }
                    // Ended here or elsewhere, or taken over: the new owner finishes it.
                    Finished::Recorded
                    | Finished::AlreadyTerminal
                    | Finished::NotOurs
                    | Finished::OtherTenant => Disposition::Ack,
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
            }) => return core.republish(job.job_id).await,
            Ok(Claim::Busy { lease_expires_at }) => {
                // Another owner holds the job. If it is alive it renews its lease and this copy
                // is a duplicate; if it died, the lease lapses and this copy takes over.
                let until_expiry = (lease_expires_at - Utc::now()).to_std().unwrap_or_default();
                if waited_since.elapsed() > BUSY_WAIT_LIMIT {
                    tracing::info!(job_id = %job.job_id, "Job stays with its live owner; duplicate message acknowledged.");
                    return Disposition::Ack;
                }
                tokio::select! {
                    biased;
                    _ = tokio::time::sleep(until_expiry + Duration::from_millis(250)) => {}
                    _ = stop.cancelled() => return Disposition::Retry(Requeue::Shutdown),
                }
            }
            Ok(Claim::CancelRequested) => {
                let canceled = Canceled {
                    job_id: job.job_id,
                    tenant: headers.tenant,
                    metadata: &job.metadata,
                    request_id: headers.request_id,
                    owner: None,
                    executions: &[],
                };
                match cancel::end_cancel(core, &canceled).await {
                    CancelEnd::Ended => return Disposition::Ack,
                    CancelEnd::MovedOn => {}
                    CancelEnd::OtherTenant => return rejects::other_tenant(job.job_id),
                    CancelEnd::NotRecorded(reason) => {
                        tracing::warn!(job_id = %job.job_id, %reason, "Could not end the job's cancel; the message will be retried.");
                        return Disposition::Retry(Requeue::StateDatabase);
                    }
                }
            }
            Ok(Claim::OtherTenant) => return rejects::other_tenant(job.job_id),
            Ok(Claim::Unknown) => return rejects::unknown_job(job.job_id),
            Err(error) if error.is_retriable() => {
                tracing::warn!(job_id = %job.job_id, %error, "Could not claim the job; the message will be retried.");
                return Disposition::Retry(Requeue::StateDatabase);
            }
            // The database refuses this job for good (a value it cannot store): retrying would
            // loop forever, so the job fails with the reason.
            Err(error) => {
                tracing::warn!(job_id = %job.job_id, %error, "Job failed: the state database refuses it.");
                let message = Redacted::new(&format!("the job cannot be recorded: {error}"));
                return rejects::fail_unrun(core, job.job_id, headers, &Map::new(), message).await;
            }
        }
    }
}

/// The message's next delivery claims the job at once instead of waiting for this claim to
/// lapse (if the database cannot be told now, it lapses by itself).
async fn release(core: &JobCore, job_id: Uuid, owner: &str) {
    if let Err(error) = core.ports.jobs.release(job_id, owner).await {
        tracing::debug!(%job_id, %error, "Could not release the job's claim; it will lapse.");
    }
}

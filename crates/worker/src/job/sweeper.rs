//! Failing jobs whose Worker was lost: their claim lapsed long ago and no redelivery took them
//! over (a redelivered message normally does, as soon as the lease lapses).

use std::sync::Arc;
use std::time::Duration;

use contract::lifecycle::ExecutionStatus;
use contract::Redacted;
use outbox::{Close, WORKER_LOST};
use tokio_util::sync::CancellationToken;

use super::after_commit::discard_object;
use super::cancel::{end_cancel, CancelEnd, Canceled};
use super::core::JobCore;
use super::deletion::{finish_deletion, Deletion};
use super::events::EventContext;
use super::finish::{finish, Ending, Finished};

/// Every `interval`, records `failed` (with [`WORKER_LOST`]) each processing job whose lease
/// lapsed more than `grace` ago, and publishes its event; a job whose owner died while
/// canceling it ends `canceled` instead; a deletion left in progress (its object could not be
/// deleted) is finished; an object left by a job that did not keep it is deleted.
pub struct Sweeper {
    pub core: Arc<JobCore>,
    pub interval: Duration,
    pub grace: Duration,
}

impl Sweeper {
    pub async fn run(&self, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(self.interval);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            if let Err(error) = self.sweep_once().await {
                tracing::warn!(%error, "Sweeping lost jobs failed; the next pass retries.");
            }
        }
    }

    /// One pass; returns how many jobs were ended (failed, canceled or deleted).
    pub async fn sweep_once(&self) -> anyhow::Result<usize> {
        let core = &self.core;
        let expired = core.ports.jobs.expired_jobs(self.grace, 100).await?;
        let publisher = format!("{}/sweeper", core.settings.worker_id);
        let mut failed = 0;
        for job in expired {
            let tenant = job.tenant_id.as_deref();
            if job.canceling {
                // Its owner died while canceling it: the cancel ends here.
                let canceled = Canceled {
                    job_id: job.job_id,
                    tenant,
                    metadata: &job.metadata,
                    request_id: job.request_id.as_deref(),
                    owner: None,
                    executions: &[],
                };
                match end_cancel(core, &canceled).await {
                    CancelEnd::Ended => failed += 1,
                    CancelEnd::MovedOn | CancelEnd::OtherTenant => {}
                    CancelEnd::NotRecorded(reason) => anyhow::bail!("{reason}"),
                }
                continue;
            }
            let mut ending = Ending::failed(
                EventContext {
                    job_id: job.job_id,
                    tenant,
                    request_id: job.request_id.as_deref(),
                    metadata: &job.metadata,
                    source: &core.settings.source,
                },
                &publisher,
                Redacted::new(WORKER_LOST),
            );
            // The lost run may have stored its object before it died; its datasources still
            // running failed with it.
            ending.earlier_object = true;
            ending.close = Some(Close {
                running: ExecutionStatus::Failed,
                error: Some(WORKER_LOST),
            });
            match finish(core, ending).await {
                Finished::Recorded => {
                    failed += 1;
                    tracing::warn!(job_id = %job.job_id, tenant = tenant.unwrap_or(""), "Job failed: its Worker was lost during extraction.");
                }
                // A redelivery took the job over, or it ended meanwhile.
                Finished::AlreadyTerminal | Finished::NotOurs | Finished::OtherTenant => {}
                Finished::NotRecorded(_, reason) => anyhow::bail!("{reason}"),
            }
        }
        // Deletions whose object could not be deleted (S3 was away): again, until they end.
        let deleting = core
            .ports
            .jobs
            .deletions_in_progress(self.grace, 100)
            .await?;
        for (job_id, tenant) in deleting {
            if finish_deletion(core, job_id, tenant.as_deref(), &publisher).await
                == Deletion::Deleted
            {
                failed += 1;
            }
        }
        // Objects of jobs that did not keep them, whose delete after the commit did not happen.
        let left = core.ports.jobs.objects_left(self.grace, 100).await?;
        for (job_id, tenant) in left {
            discard_object(core, tenant.as_deref(), job_id).await;
        }
        Ok(failed)
    }
}

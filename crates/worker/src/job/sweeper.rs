//! Failing jobs whose Worker was lost: their claim lapsed long ago and no redelivery took them
//! over (a redelivered message normally does, as soon as the lease lapses).

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use contract::Redacted;
use outbox::{Recorded, TerminalOutcome, TerminalRecord, WORKER_LOST};
use tokio_util::sync::CancellationToken;

use super::events::EventContext;
use super::JobContext;

/// Every `interval`, records `failed` (with [`WORKER_LOST`]) each processing job whose lease
/// lapsed more than `grace` ago, and publishes its event.
pub struct Sweeper {
    pub ctx: Arc<JobContext>,
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

    /// One pass; returns how many jobs were failed.
    pub async fn sweep_once(&self) -> anyhow::Result<usize> {
        let ctx = &self.ctx;
        let expired = ctx.store.expired_jobs(self.grace, 100).await?;
        let mut failed = 0;
        for job in expired {
            let error = Redacted::new(WORKER_LOST);
            let events = EventContext {
                job_id: job.job_id,
                tenant: job.tenant_id.as_deref(),
                request_id: job.request_id.as_deref(),
                metadata: &job.metadata,
                source: &ctx.source,
            };
            let event = events.failed(&error, Utc::now())?;
            let owner = format!("{}/sweeper", ctx.worker_id);
            let record = TerminalRecord {
                job_id: job.job_id,
                owner: None,
                tenant: job.tenant_id.as_deref(),
                outcome: TerminalOutcome::Failed { error },
                event: &event,
                publisher: &owner,
                lease: ctx.lease,
            };
            if let Recorded::Inserted { outbox_id } = ctx.store.record_terminal(&record).await? {
                failed += 1;
                tracing::warn!(job_id = %job.job_id, tenant = job.tenant_id.as_deref().unwrap_or(""), "Job failed: its Worker was lost during extraction.");
                crate::metrics::job_finished("failed", Duration::ZERO);
                // The lost run may have stored its object before it died.
                super::pipeline::delete_result_of(ctx, job.tenant_id.as_deref(), job.job_id).await;
                super::pipeline::publish_now(ctx, outbox_id, job.job_id, event, &owner).await;
            }
        }
        Ok(failed)
    }
}

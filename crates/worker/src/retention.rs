//! Retention (issue 37 item 3): completed jobs' results deleted after `RESULT_RETENTION_DAYS`
//! through the lifecycle's own delete (two phases, `job.deletion_in_progress` then
//! `job.deleted` with comment `retention`, the tombstone kept), and ended jobs' rows pruned
//! after `JOB_RETENTION_DAYS` (a tombstone, a failed or canceled job: rows that hold no
//! object). Both are off by default. One replica at a time runs a pass: it holds the
//! `retention` lease in the state database for twice the interval, renewed by each pass.

use std::sync::Arc;
use std::time::Duration;

use contract::lifecycle::Step;
use outbox::{ControlRequest, OutboxError, Store};
use tokio_util::sync::CancellationToken;

use crate::config::RetentionSettings;
use crate::job::{after_commit, Committed, JobCore};
use crate::metrics;

/// The lease's name in `pass_leases`.
const LEASE: &str = "retention";
/// The comment and reason code of a retention delete, in its events and the job document.
pub const COMMENT: &str = "retention";
const REASON_CODE: &str = "RETENTION";
/// Jobs read per batch, and the most batches of results deleted per pass: a pass stays short,
/// and the next one goes on.
const BATCH: i64 = 100;
const MAX_BATCHES: usize = 10;

/// The retention passes of one Worker.
pub struct Retention {
    pub core: Arc<JobCore>,
    pub store: Store,
    pub settings: RetentionSettings,
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Another replica holds the lease: nothing was done.
    pub skipped: bool,
    /// Completed jobs whose delete was accepted (their objects deleted unless the store was
    /// away: the sweeper finishes those).
    pub results_deleted: u64,
    /// Ended jobs whose rows were pruned.
    pub jobs_pruned: u64,
}

impl Retention {
    /// Runs a pass every `RETENTION_INTERVAL_SEC` until `stop`; nothing when both are off.
    pub async fn run(&self, stop: CancellationToken) {
        if !self.settings.enabled() {
            return;
        }
        let mut ticks = tokio::time::interval(self.settings.interval);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            match self.pass_once().await {
                Ok(pass) if pass.results_deleted + pass.jobs_pruned > 0 => {
                    tracing::info!(
                        results_deleted = pass.results_deleted,
                        jobs_pruned = pass.jobs_pruned,
                        "Retention pass done."
                    );
                }
                Ok(_) => {}
                Err(error) => {
                    metrics::retention_pass("failed");
                    tracing::warn!(%error, "The retention pass failed; the next one tries again.");
                }
            }
        }
    }

    /// One pass, if this Worker holds (or takes) the lease.
    pub async fn pass_once(&self) -> Result<Pass, OutboxError> {
        let owner = &self.core.settings().worker_id;
        let lease = self.settings.interval * 2;
        if !self.store.take_pass_lease(LEASE, owner, lease).await? {
            metrics::retention_pass("skipped");
            return Ok(Pass {
                skipped: true,
                ..Pass::default()
            });
        }
        let mut pass = Pass::default();
        if let Some(age) = self.settings.results {
            pass.results_deleted = self.delete_results(age).await?;
        }
        if let Some(age) = self.settings.jobs {
            pass.jobs_pruned = self.store.prune_ended_jobs(age, BATCH).await?;
            metrics::retention_pruned(pass.jobs_pruned);
        }
        metrics::retention_pass("done");
        Ok(pass)
    }

    /// Deletes the results of completed jobs older than `age`, as a delete request would.
    async fn delete_results(&self, age: Duration) -> Result<u64, OutboxError> {
        let settings = self.core.settings();
        let publisher = format!("{}/retention", settings.worker_id);
        let mut deleted = 0;
        for _ in 0..MAX_BATCHES {
            let due = self.store.results_due(age, BATCH).await?;
            let full = due.len() == usize::try_from(BATCH).unwrap_or(usize::MAX);
            for (job_id, tenant) in due {
                let request = ControlRequest {
                    job_id,
                    tenant: tenant.as_deref(),
                    step: Step::Delete { force: false },
                    comment: Some(COMMENT),
                    reason_code: Some(REASON_CODE),
                    source: &settings.source,
                    request_id: None,
                    publisher: &publisher,
                    lease: settings.lease,
                };
                // Refused: the job moved on (a delete request came first).
                let Ok(committed) = Committed::of(self.store.control(&request).await?) else {
                    continue;
                };
                deleted += 1;
                metrics::retention_deleted();
                tracing::info!(%job_id, tenant = tenant.as_deref().unwrap_or(""), "Job result past RESULT_RETENTION_DAYS: deleting it.");
                // The object, then `deleted`, as for a delete request.
                after_commit(&self.core, job_id, tenant.as_deref(), &publisher, committed).await;
            }
            if !full {
                break;
            }
        }
        Ok(deleted)
    }
}

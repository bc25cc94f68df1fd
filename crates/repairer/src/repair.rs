//! The repairer: every interval, lease the events that were never published and relay them.

use std::sync::Arc;
use std::time::Duration;

use outbox::{OutboxError, Store};
use publisher::Publisher;
use tokio_util::sync::CancellationToken;

use crate::relay::{relay, RelayReport};

/// How the repairer works (the Worker maps `OUTBOX_*` onto this).
#[derive(Debug, Clone)]
pub struct RepairerConfig {
    /// Who leases rows: unique per Worker process.
    pub owner: String,
    /// Between passes (upstream: 30 s).
    pub interval: Duration,
    /// Rows leased per batch (upstream: 25 per pass; a pass here drains the backlog in
    /// batches of this size).
    pub batch: i64,
    /// Rows younger than this are left to the Worker that recorded them.
    pub grace: Duration,
    /// How long a leased row is the repairer's: longer than a batch's publish can take, so
    /// two repairers never publish one row at the same time.
    pub lease: Duration,
    /// Published rows older than this are deleted.
    pub retention: Duration,
    /// Rows deleted per statement.
    pub purge_batch: i64,
}

impl RepairerConfig {
    pub fn new(owner: impl Into<String>) -> RepairerConfig {
        RepairerConfig {
            owner: owner.into(),
            interval: Duration::from_secs(30),
            batch: 25,
            grace: Duration::from_secs(10),
            lease: Duration::from_secs(60),
            retention: Duration::from_secs(7 * 24 * 3600),
            purge_batch: 1000,
        }
    }
}

/// Republishes unpublished outbox rows, at least once each, with the same ce-id and body.
pub struct Repairer {
    store: Store,
    publisher: Arc<Publisher>,
    config: RepairerConfig,
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassReport {
    pub leased: u64,
    pub relayed: RelayReport,
    pub purged: u64,
}

impl Repairer {
    pub fn new(store: Store, publisher: Arc<Publisher>, config: RepairerConfig) -> Repairer {
        Repairer {
            store,
            publisher,
            config,
        }
    }

    /// Runs passes every interval until `stop` is cancelled; a pass in progress finishes its
    /// current batch first. A failing pass is logged and counted, and the next one runs as usual.
    pub async fn run(&self, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(self.config.interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            match self.repair_once(&stop).await {
                Ok(report) => {
                    crate::metrics::repair_pass(true);
                    if report.leased > 0 || report.purged > 0 {
                        tracing::info!(
                            leased = report.leased,
                            published = report.relayed.published,
                            failed = report.relayed.failed,
                            purged = report.purged,
                            "Outbox repair pass done."
                        );
                    }
                }
                Err(error) => {
                    crate::metrics::repair_pass(false);
                    tracing::warn!(error = %error, "Outbox repair pass failed; the next one will retry.");
                }
            }
        }
    }

    /// One pass: relay due unpublished rows batch by batch until none is left (or `stop`),
    /// delete expired published rows, and refresh the outbox gauges.
    pub async fn repair_once(&self, stop: &CancellationToken) -> Result<PassReport, OutboxError> {
        let mut report = PassReport::default();
        while !stop.is_cancelled() {
            let leased = self
                .store
                .claim_unpublished(
                    &self.config.owner,
                    self.config.grace,
                    self.config.lease,
                    self.config.batch,
                )
                .await?;
            report.leased += leased.len() as u64;
            let relayed = relay(&self.store, &self.publisher, &self.config.owner, &leased).await?;
            report.relayed.published += relayed.published;
            report.relayed.failed += relayed.failed;
            // A short batch means the backlog is drained; a batch that failed whole means the
            // broker is away, and trying the rest now would only fail too.
            if (leased.len() as i64) < self.config.batch || relayed.published == 0 {
                break;
            }
        }
        report.purged = self
            .store
            .purge_published(self.config.retention, self.config.purge_batch)
            .await?;
        self.store.stats().await?.record();
        Ok(report)
    }
}

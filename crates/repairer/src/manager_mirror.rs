//! The MQTT mirror's relay in the Manager mode ([`ManagerMirror`]): the rows of
//! `fetcher_worker_mirror` (`mongostate::mirror`), which this Worker alone writes and reads,
//! relayed as the PostgreSQL mode's mirror relay relays its MQTT rows (`repair.rs` with
//! `RepairerConfig::poll`): due rows polled often (nobody publishes them right after their
//! commit), taken batch by batch, published, deleted once the broker acknowledged them and
//! backed off otherwise (the backoff of `relay::Sorted`, shared with every relay).
//!
//! MongoDB holds no row lock across a publish, so a batch is leased instead
//! (`mongostate::mirror_queue`); a relay that dies mid-batch leaves its rows to the next relay
//! once [`ManagerMirrorConfig::lease`] lapses.

use std::sync::Arc;
use std::time::Duration;

use mongostate::{mirror_queue, to_outbox, ManagerStore};
use outbox::{OutboxError, RowId, Sink};
use publisher::mqtt::MqttPublisher;
use tokio_util::sync::CancellationToken;

use crate::relay::{broker_away, RelayReport, Sorted};
use crate::sink::SinkPublisher;
use crate::ticks::ticks;

/// How the Manager mode's mirror relay works.
#[derive(Debug, Clone)]
pub struct ManagerMirrorConfig {
    /// Who leases the rows: unique per Worker process.
    pub owner: String,
    /// How often due rows are looked for. Zero means 200 ms.
    pub poll: Duration,
    /// Rows taken per batch.
    pub batch: i64,
    /// Rows younger than this are left alone (zero: nobody else publishes them).
    pub grace: Duration,
    /// How long a taken row is this relay's: longer than a batch's publish can take.
    pub lease: Duration,
    /// How often the backlog's gauges (`fetcher_outbox_*{sink="mqtt"}`) are refreshed. Zero
    /// means 30 s.
    pub stats_interval: Duration,
}

impl ManagerMirrorConfig {
    pub fn new(owner: impl Into<String>) -> ManagerMirrorConfig {
        ManagerMirrorConfig {
            owner: owner.into(),
            poll: Duration::from_millis(200),
            batch: 100,
            grace: Duration::ZERO,
            lease: Duration::from_secs(60),
            stats_interval: Duration::from_secs(30),
        }
    }
}

/// What one relay pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagerMirrorReport {
    /// Rows taken.
    pub taken: u64,
    /// `published`: rows delivered and deleted.
    pub relayed: RelayReport,
}

/// Relays `fetcher_worker_mirror` to the MQTT broker.
pub struct ManagerMirror {
    store: ManagerStore,
    publisher: SinkPublisher,
    config: ManagerMirrorConfig,
}

impl ManagerMirror {
    pub fn new(
        store: ManagerStore,
        publisher: Arc<MqttPublisher>,
        config: ManagerMirrorConfig,
    ) -> ManagerMirror {
        ManagerMirror {
            store,
            publisher: publisher.into(),
            config,
        }
    }

    /// Relays what is due every poll until `stop` is cancelled; a failing pass is logged and
    /// the next poll retries.
    pub async fn run(&self, stop: CancellationToken) {
        let mut polls = ticks(self.config.poll, Duration::from_millis(200));
        let mut gauges = ticks(self.config.stats_interval, Duration::from_secs(30));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = polls.tick() => {}
                _ = gauges.tick() => {
                    match mirror_queue::stats(self.store.store()).await {
                        Ok(stats) => stats.record(Sink::Mqtt),
                        Err(error) => tracing::warn!(sink = "mqtt", error = %error, "Manager mirror backlog not read; the next tick will retry."),
                    }
                    continue;
                }
            }
            if let Err(error) = self.relay_once(&stop).await {
                tracing::warn!(sink = "mqtt", error = %error, "Manager mirror relay failed; the next poll will retry.");
            }
        }
    }

    /// Takes due rows batch by batch until none is left, `stop`, or the broker is away; each
    /// batch published, its delivered rows deleted and the others backed off.
    pub async fn relay_once(
        &self,
        stop: &CancellationToken,
    ) -> Result<ManagerMirrorReport, OutboxError> {
        const STEP: &str = "relaying the MQTT mirror's rows";
        let config = &self.config;
        let store = self.store.store();
        let mut report = ManagerMirrorReport::default();
        // A publisher that knows it is away would only fail the rows and count their attempts.
        while !stop.is_cancelled() && self.publisher.is_connected() {
            let taken = mirror_queue::claim_due(
                store,
                &config.owner,
                config.grace,
                config.lease,
                config.batch,
            )
            .await
            .map_err(|e| to_outbox(STEP, e))?;
            report.taken += taken.len() as u64;
            if taken.is_empty() {
                break;
            }
            let outcomes = self.publisher.send(&taken).await;
            let away = broker_away(&outcomes);
            let sorted = Sorted::of(&taken, outcomes);
            report.relayed.failed += sorted.report.failed;
            report.relayed.rejected += sorted.report.rejected;
            let delivered: Vec<_> = sorted
                .confirmed
                .iter()
                .filter_map(|id| match id {
                    RowId::Uuid(id) => Some(*id),
                    _ => None,
                })
                .collect();
            report.relayed.published +=
                mirror_queue::delete_published(store, &delivered, &config.owner)
                    .await
                    .map_err(|e| to_outbox(STEP, e))?;
            for failed in &sorted.unpublished {
                let RowId::Uuid(id) = failed.id else { continue };
                mirror_queue::mark_failed(
                    store,
                    id,
                    &config.owner,
                    &failed.error,
                    failed.retry_after,
                )
                .await
                .map_err(|e| to_outbox(STEP, e))?;
            }
            if (taken.len() as i64) < config.batch || away {
                break;
            }
        }
        Ok(report)
    }
}

//! The repairer: every interval, lease the events that were never published and relay them.

use std::time::Duration;

use futures_util::future::join_all;
use outbox::{MirrorCursor, OutboxError, Sink, Store};
use tokio_util::sync::CancellationToken;

use crate::relay::{broker_away, finish, record, RelayReport};
use crate::sink::SinkPublisher;
use crate::ticks::ticks;

/// How the repairer works (the Worker maps `OUTBOX_*` onto this).
#[derive(Debug, Clone)]
pub struct RepairerConfig {
    /// Who leases rows: unique per Worker process.
    pub owner: String,
    /// Between passes (upstream: 30 s). Zero, which would panic the timer, means 30 s.
    pub interval: Duration,
    /// Rows leased per batch (upstream: 25 per pass; a pass here drains the backlog in
    /// batches of this size).
    pub batch: i64,
    /// Batches a pass relays at once, each on its own publisher channel and state-database
    /// connection, so that one batch's database round trips overlap another's publish (3:
    /// see `BENCHMARKS.md`). At least 1; keep it below the publisher's channels (4 by default),
    /// which the Worker's own publishes share.
    pub batches_in_flight: usize,
    /// Rows younger than this are left to the Worker that recorded them.
    pub grace: Duration,
    /// How long a leased row is the repairer's: longer than a batch's publish can take, so
    /// two repairers never publish one row at the same time.
    pub lease: Duration,
    /// Published rows older than this are deleted.
    pub retention: Duration,
    /// Between two passes, also relay what is due this often (no purge, no gauges): the MQTT
    /// mirror's relay, whose rows nobody publishes right after their commit. `None`: passes
    /// only.
    pub poll: Option<Duration>,
    /// Rows deleted per statement.
    pub purge_batch: i64,
}

/// [`RepairerConfig::interval`]'s default, upstream's.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);

impl RepairerConfig {
    pub fn new(owner: impl Into<String>) -> RepairerConfig {
        RepairerConfig {
            owner: owner.into(),
            interval: DEFAULT_INTERVAL,
            batch: 25,
            batches_in_flight: 3,
            grace: Duration::from_secs(10),
            lease: Duration::from_secs(60),
            retention: Duration::from_secs(7 * 24 * 3600),
            purge_batch: 1000,
            poll: None,
        }
    }
}

/// Republishes one sink's unpublished outbox rows, at least once each, with the same ce-id and
/// body.
pub struct Repairer {
    store: Store,
    publisher: SinkPublisher,
    config: RepairerConfig,
}

/// Where a pass's loops take the mirror's next batch (`outbox::MirrorCursor`).
type Cursor = tokio::sync::Mutex<Option<MirrorCursor>>;

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassReport {
    pub leased: u64,
    pub relayed: RelayReport,
    pub purged: u64,
}

impl Repairer {
    /// The repairer of `publisher`'s sink (an `Arc<Publisher>` for AMQP, an
    /// `Arc<MqttPublisher>` for the mirror).
    pub fn new(
        store: Store,
        publisher: impl Into<SinkPublisher>,
        config: RepairerConfig,
    ) -> Repairer {
        Repairer {
            store,
            publisher: publisher.into(),
            config,
        }
    }

    /// Runs passes every interval until `stop` is cancelled; a pass in progress first finishes
    /// the batches it has leased. A failing pass is logged and counted, and the next one runs
    /// as usual.
    pub async fn run(&self, stop: CancellationToken) {
        let mut passes = ticks(self.config.interval, DEFAULT_INTERVAL);
        // Without polls the timer never fires (the branch is off), so its period does not matter.
        let poll_period = self.config.poll.filter(|p| !p.is_zero());
        let mut polls = ticks(poll_period.unwrap_or_default(), Duration::from_secs(3600));
        let sink = self.publisher.sink();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = passes.tick() => {}
                _ = polls.tick(), if poll_period.is_some() => {
                    let mut report = PassReport::default();
                    if let Err(error) = self.drain(&stop, &mut report).await {
                        tracing::warn!(sink = %sink, error = %error, "Outbox relay failed; the next poll will retry.");
                    }
                    continue;
                }
            }
            match self.repair_once(&stop).await {
                Ok(report) => {
                    crate::metrics::repair_pass(sink, true);
                    if report.leased > 0 || report.purged > 0 {
                        tracing::info!(
                            leased = report.leased,
                            published = report.relayed.published,
                            failed = report.relayed.failed,
                            purged = report.purged,
                            sink = %sink,
                            "Outbox repair pass done."
                        );
                    }
                }
                Err(error) => {
                    crate::metrics::repair_pass(sink, false);
                    tracing::warn!(sink = %sink, error = %error, "Outbox repair pass failed; the next one will retry.");
                }
            }
        }
    }

    /// One pass: relay due unpublished rows batch by batch until none is left (or `stop`),
    /// delete expired published rows, and refresh the outbox gauges (and, for AMQP, the age of
    /// the jobs stuck canceling or deleting).
    ///
    /// Several batches are relayed at once ([`RepairerConfig::batches_in_flight`]), so the state
    /// database's round trips for one overlap the broker's for another instead of adding to
    /// them. Each batch is leased (the mirror's: taken under row locks) right before it is
    /// published and recorded right after its confirms.
    pub async fn repair_once(&self, stop: &CancellationToken) -> Result<PassReport, OutboxError> {
        let mut report = PassReport::default();
        self.drain(stop, &mut report).await?;
        report.purged = self
            .store
            .purge_published(self.config.retention, self.config.purge_batch)
            .await?;
        let sink = self.publisher.sink();
        self.store.stats(sink).await?.record(sink);
        if sink == Sink::Amqp {
            // Jobs are one per database, not per sink: the AMQP repairer (always on) reports them.
            self.store.transition_ages().await?.record();
        }
        Ok(report)
    }

    /// Takes one batch of the sink's due rows, publishes it and records the outcomes: how many
    /// rows it took, whether the broker seems away, and what was relayed. AMQP rows are leased and
    /// marked (they are the events' record); the mirror's MQTT rows are taken under row locks and
    /// deleted once acknowledged (`outbox::MirrorBatch`).
    async fn relay_batch(
        &self,
        cursor: &Cursor,
    ) -> Result<(usize, bool, RelayReport), OutboxError> {
        let config = &self.config;
        match self.publisher.sink() {
            Sink::Amqp => {
                let leased = self
                    .store
                    .claim_unpublished(&config.owner, config.grace, config.lease, config.batch)
                    .await?;
                let outcomes = self.publisher.send(&leased).await;
                let away = broker_away(&outcomes);
                let report = record(&self.store, &config.owner, &leased, outcomes).await?;
                Ok((leased.len(), away, report))
            }
            Sink::Mqtt => {
                // One loop takes at a time, after the batch taken before, so loops never step
                // over each other's locked rows.
                let batch = {
                    let mut cursor = cursor.lock().await;
                    let batch = self
                        .store
                        .take_mirror_batch(config.grace, config.batch, *cursor)
                        .await?;
                    *cursor = batch.cursor();
                    batch
                };
                let taken = batch.events().len();
                let outcomes = self.publisher.send(batch.events()).await;
                let away = broker_away(&outcomes);
                Ok((taken, away, finish(batch, outcomes).await?))
            }
        }
    }

    /// Relays batches until the backlog is drained, `stop` is cancelled, or the broker is away:
    /// [`RepairerConfig::batches_in_flight`] loops at once, each taking, publishing and
    /// recording one batch at a time (the mirror's loops take theirs one after another, from a
    /// shared cursor). All loops run to their end (none is dropped with a batch
    /// published and not recorded); the first error is returned.
    async fn drain(
        &self,
        stop: &CancellationToken,
        report: &mut PassReport,
    ) -> Result<(), OutboxError> {
        let cursor = Cursor::default();
        let loops =
            (0..self.config.batches_in_flight.max(1)).map(|_| self.drain_loop(stop, &cursor));
        let mut first_error = None;
        for (done, result) in join_all(loops).await {
            report.leased += done.leased;
            add(&mut report.relayed, done.relayed);
            if let Err(error) = result {
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// One loop of [`Repairer::drain`]: what it did, and how it ended.
    async fn drain_loop(
        &self,
        stop: &CancellationToken,
        cursor: &Cursor,
    ) -> (PassReport, Result<(), OutboxError>) {
        let mut report = PassReport::default();
        // A publisher that knows it is away would only fail the rows and count their attempts.
        while !stop.is_cancelled() && self.publisher.is_connected() {
            let (taken, away, relayed) = match self.relay_batch(cursor).await {
                Ok(done) => done,
                Err(error) => return (report, Err(error)),
            };
            report.leased += taken as u64;
            add(&mut report.relayed, relayed);
            // A short batch means the backlog is drained (what is left is leased to the other
            // loops). A batch that failed whole, not only because the broker returned or refused
            // its events, means the broker is away: trying more now would only fail too. A
            // batch the broker returned whole (no queue bound for its routing key) says nothing
            // of the events behind it: go on.
            if (taken as i64) < self.config.batch || away {
                break;
            }
        }
        (report, Ok(()))
    }
}

fn add(total: &mut RelayReport, batch: RelayReport) {
    total.published += batch.published;
    total.failed += batch.failed;
    total.rejected += batch.rejected;
}

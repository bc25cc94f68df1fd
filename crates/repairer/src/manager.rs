//! The relay and the repairer of the Manager mode: rows of lib-streaming's
//! `streaming_outbox_events` in the Manager's MongoDB, which Go relays share (UPSTREAM-MANAGER
//! §4-§6).
//!
//! - [`ManagerRelay::deliver`]: the rows a terminal record (or a redelivery's republish) wrote
//!   already claimed by their publisher (`PROCESSING` under its `claim_token`, see
//!   `mongostate::outbox_event`); published, then marked `PUBLISHED`, or given back `FAILED`,
//!   each only while the publisher still holds it, row by row.
//! - [`ManagerRepairer::repair_once`]: Go's terminal-event repairer (markers re-emitted as new
//!   rows with their `ce-id`), then lib-commons' dispatcher pass over every tenant's rows (stuck,
//!   failed, then pending; the conditional claim of §4.6, so this Worker and Go relays never hold
//!   one row version at once), each claimed row published and settled as lib-commons settles it;
//!   then this Worker's own due rows.
//!
//! Upstream's gaps and what is chosen here:
//! - A failed publish is retried after lib-commons' 5-minute window, not this Worker's backoff:
//!   the row's fields are lib-commons' and every relay of the deployment reads them alike. That
//!   window and the 10-minute takeover of a claimed row are the store's
//!   `outbox_claim::ClaimWindows`, lib-commons' defaults unless the deployment sets them.
//! - Neither a pass nor the publisher right after a commit abandons what it holds: when MongoDB
//!   fails after the claim (or the commit), the rows still held are given back `PENDING` at
//!   once, or by the repairer's next pass when the server is away (`claimed`, the store's
//!   `held_claims`); lib-commons leaves them to its takeover. A row whose publish was confirmed
//!   and whose mark was lost is then published again (at least once).
//! - A row naming another exchange than this Worker's publisher is given back `FAILED` for the
//!   relays configured for it (lib-commons trusts the row's exchange; this publisher has one).
//! - lib-streaming's published and invalid rows are never pruned, as upstream never prunes them
//!   (its open question Q6; a TTL index would change a collection Go owns); this Worker's own
//!   rows are deleted once published for [`ManagerRepairerConfig::retention`].
//! - Events a Go relay would refuse (executions', and cancels' and deletions' when the Manager
//!   mode offers them) are rows of this Worker's own collection (`mongostate::worker_outbox`),
//!   leased and backed off as the PostgreSQL mode's rows; the pass relays them last.

mod claimed;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use mongostate::held_claims::OpenClaim;
use mongostate::outbox_claim::{self, Candidates};
use mongostate::{outbox_event, to_outbox, worker_outbox, ManagerStore};
use outbox::{OutboxError, PendingEvent, RowId, Sink};
use publisher::Publisher;
use tokio_util::sync::CancellationToken;

use crate::relay::{broker_away, RelayReport, Sorted};
use crate::sink::SinkPublisher;
use crate::ticks::ticks;

/// Publishes the rows leased to a publisher right after their commit.
#[derive(Clone)]
pub struct ManagerRelay {
    store: ManagerStore,
    publisher: SinkPublisher,
}

impl ManagerRelay {
    pub fn new(store: ManagerStore, publisher: Arc<Publisher>) -> ManagerRelay {
        ManagerRelay {
            store,
            publisher: publisher.into(),
        }
    }

    /// Publishes `events` (rows held by `owner`), marks the confirmed ones `PUBLISHED` and gives
    /// the others back `FAILED`, row by row. Errors are only the database's, the first one met:
    /// a row whose mark fails is given back at once for any relay to take (lib-streaming's
    /// `PENDING`, this Worker's own due again), and when MongoDB refuses that too the rows
    /// `owner` still holds are given back by the repairer's next pass (the store's
    /// `held_claims`), never left `PROCESSING` for the 10-minute takeover. A row given back after
    /// its publish was confirmed is published again: at least once, consumers dedupe on `ce-id`.
    pub async fn deliver(
        &self,
        owner: &str,
        events: &[PendingEvent],
    ) -> Result<RelayReport, OutboxError> {
        if events.is_empty() {
            return Ok(RelayReport::default());
        }
        let outcomes = self.publisher.send(events).await;
        let sorted = Sorted::of(events, outcomes);
        let mut report = sorted.report;
        settle(&self.store, owner, events, &sorted, &mut report).await?;
        Ok(report)
    }
}

const SETTLING: &str = "settling published Manager outbox rows";

/// Settles published rows while `owner` holds them, one by one, each in its collection: a
/// terminal event's row in `streaming_outbox_events` (`PUBLISHED`, or `FAILED` for lib-commons'
/// retry window), any other in this Worker's own outbox (published, or backed off as the
/// relay's sorting says). A row whose settling fails is given back ([`give_back`]) and the
/// others still settled; the first error is returned. When the giving back fails too, the
/// server is away and settling stops there.
async fn settle(
    store: &ManagerStore,
    owner: &str,
    events: &[PendingEvent],
    sorted: &Sorted,
    report: &mut RelayReport,
) -> Result<(), OutboxError> {
    let rows = store.store();
    let now = Utc::now();
    let mut failure = None;
    let find = |id: &RowId| events.iter().find(|e| e.id == *id);
    for id in &sorted.confirmed {
        let (Some(event), RowId::Uuid(row)) = (find(id), *id) else {
            continue;
        };
        let marked = if worker_outbox::is_streaming_event(&event.event) {
            outbox_event::mark_published_by(rows, row, event.event.tenant(), owner, now).await
        } else {
            worker_outbox::mark_published(rows, row, owner).await
        };
        match marked {
            Ok(marked) => report.published += u64::from(marked),
            Err(error) => give_back(store, owner, events, event, error, &mut failure).await?,
        }
    }
    for failed in &sorted.unpublished {
        let (Some(event), RowId::Uuid(row)) = (find(&failed.id), failed.id) else {
            continue;
        };
        let marked = if worker_outbox::is_streaming_event(&event.event) {
            let tenant = event.event.tenant();
            outbox_event::mark_failed_by(rows, row, tenant, owner, &failed.error, now)
                .await
                .map(drop)
        } else {
            worker_outbox::mark_failed(rows, row, owner, &failed.error, failed.retry_after)
                .await
                .map(drop)
        };
        if let Err(error) = marked {
            give_back(store, owner, events, event, error, &mut failure).await?;
        }
    }
    failure.map_or(Ok(()), Err)
}

/// The row of `event` (one of `events`), whose settling failed with `error`, given back at once
/// while `owner` holds it, for any relay to take: a row of lib-streaming's as `PENDING`
/// (`outbox_claim::release`, guarded by `owner`'s token as a pass's claim is by its own), one of
/// this Worker's own due now. When that fails too (see `claimed::after_give_back`), `owner`'s
/// claim on every tenant of `events` is held for the repairer's next pass, and `Err` stops the
/// settling; this Worker's own rows wait for their lease to lapse.
async fn give_back(
    store: &ManagerStore,
    owner: &str,
    events: &[PendingEvent],
    event: &PendingEvent,
    error: mongostate::Error,
    failure: &mut Option<OutboxError>,
) -> Result<(), OutboxError> {
    let rows = store.store();
    let RowId::Uuid(row) = event.id else {
        // `settle` marks only rows with a UUID (the PostgreSQL mode's have another id).
        return Err(failure.take().unwrap_or_else(|| to_outbox(SETTLING, error)));
    };
    let given_back = if worker_outbox::is_streaming_event(&event.event) {
        let id = row.hyphenated().to_string();
        let tenant = event.event.tenant();
        outbox_claim::release(rows, tenant, owner, Some(&id), Utc::now())
            .await
            .map(drop)
    } else {
        let why = error.to_string();
        worker_outbox::mark_failed(rows, row, owner, &why, Duration::ZERO)
            .await
            .map(drop)
    };
    let open = events
        .iter()
        .filter(|e| worker_outbox::is_streaming_event(&e.event))
        .map(|e| OpenClaim {
            tenant: e.event.tenant().to_owned(),
            token: owner.to_owned(),
        });
    let error = to_outbox(SETTLING, error);
    claimed::after_give_back(store, given_back, open, error, failure)
}

/// How the Manager mode's repairer works.
#[derive(Debug, Clone)]
pub struct ManagerRepairerConfig {
    /// Who leases this Worker's own rows: unique per Worker process.
    pub owner: String,
    /// Between passes (upstream: 30 s). Zero means 30 s.
    pub interval: Duration,
    /// Rows claimed per batch (lib-commons: 50).
    pub batch: i64,
    /// This Worker's own rows younger than this are left to the Worker that recorded them.
    pub grace: Duration,
    /// How long one of this Worker's own rows leased by the repairer is its.
    pub lease: Duration,
    /// This Worker's own rows published more than this long ago are deleted.
    pub retention: Duration,
}

impl ManagerRepairerConfig {
    pub fn new(owner: impl Into<String>) -> ManagerRepairerConfig {
        ManagerRepairerConfig {
            owner: owner.into(),
            interval: Duration::from_secs(30),
            batch: 50,
            grace: Duration::from_secs(10),
            lease: Duration::from_secs(60),
            retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagerPassReport {
    /// The `ce-id`s re-emitted from terminal-event markers.
    pub re_emitted: Vec<String>,
    /// Rows claimed from `streaming_outbox_events` and leased from this Worker's own outbox.
    pub claimed: u64,
    /// Claimed rows no relay can publish, made `INVALID`.
    pub invalid: u64,
    pub relayed: RelayReport,
    /// This Worker's own published rows deleted after their retention.
    pub purged: u64,
}

/// The Manager mode's 30-second pass: markers, then every due row of every tenant.
pub struct ManagerRepairer {
    store: ManagerStore,
    publisher: Arc<Publisher>,
    config: ManagerRepairerConfig,
}

impl ManagerRepairer {
    pub fn new(
        store: ManagerStore,
        publisher: Arc<Publisher>,
        config: ManagerRepairerConfig,
    ) -> ManagerRepairer {
        ManagerRepairer {
            store,
            publisher,
            config,
        }
    }

    /// Runs a pass at once and then every interval until `stop` is cancelled; a failing pass is
    /// logged and counted, and the next one runs as usual.
    pub async fn run(&self, stop: CancellationToken) {
        let mut passes = ticks(self.config.interval, Duration::from_secs(30));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = passes.tick() => {}
            }
            match self.repair_once(&stop).await {
                Ok(report) => {
                    crate::metrics::repair_pass(Sink::Amqp, true);
                    if report.claimed > 0 || !report.re_emitted.is_empty() {
                        tracing::info!(
                            re_emitted = report.re_emitted.len(),
                            claimed = report.claimed,
                            published = report.relayed.published,
                            failed = report.relayed.failed,
                            invalid = report.invalid,
                            "Manager outbox repair pass done."
                        );
                    }
                }
                Err(error) => {
                    crate::metrics::repair_pass(Sink::Amqp, false);
                    tracing::warn!(
                        error = %error,
                        claims_held = self.store.held_claims().len(),
                        "Manager outbox repair pass failed; the next one will retry and give back the claims held."
                    );
                }
            }
        }
    }

    /// One pass: the claims an earlier pass could not give back first, then the markers (their
    /// rows are then relayed in the same pass), then, for each tenant with due rows, stuck,
    /// failed and pending rows in batches until none is left or `stop`.
    pub async fn repair_once(
        &self,
        stop: &CancellationToken,
    ) -> Result<ManagerPassReport, OutboxError> {
        const STEP: &str = "relaying the Manager's outbox";
        self.give_back_held().await?;
        let mut report = ManagerPassReport {
            re_emitted: self.store.repair_markers().await?.re_emitted,
            ..ManagerPassReport::default()
        };
        let store = self.store.store();
        let tenants = outbox_claim::due_tenants(store)
            .await
            .map_err(|e| to_outbox(STEP, e))?;
        for tenant in &tenants {
            for which in [Candidates::Stuck, Candidates::Failed, Candidates::Pending] {
                while !stop.is_cancelled() {
                    let (batch, windows) = (self.config.batch, self.store.windows());
                    let claimed =
                        outbox_claim::claim(store, tenant, which, batch, Utc::now(), windows)
                            .await
                            .map_err(|e| to_outbox(STEP, e))?;
                    let taken = claimed.rows.len();
                    report.claimed += taken as u64;
                    report.invalid += claimed.invalidated as u64;
                    self.relay_claimed(claimed, tenant, &mut report).await?;
                    if (taken as i64) < self.config.batch {
                        break;
                    }
                }
            }
        }
        self.relay_own_rows(stop, &mut report).await?;
        report.purged =
            worker_outbox::purge_published(store, self.config.retention, self.config.batch)
                .await
                .map_err(|e| to_outbox(STEP, e))?;
        Ok(report)
    }

    /// This Worker's own rows that are due, leased batch by batch, published and settled.
    async fn relay_own_rows(
        &self,
        stop: &CancellationToken,
        report: &mut ManagerPassReport,
    ) -> Result<(), OutboxError> {
        const STEP: &str = "relaying this Worker's own outbox";
        let config = &self.config;
        let publisher = SinkPublisher::from(self.publisher.clone());
        while !stop.is_cancelled() {
            let leased = worker_outbox::claim_due(
                self.store.store(),
                &config.owner,
                config.grace,
                config.lease,
                config.batch,
            )
            .await
            .map_err(|e| to_outbox(STEP, e))?;
            report.claimed += leased.len() as u64;
            let outcomes = publisher.send(&leased).await;
            let away = broker_away(&outcomes);
            let sorted = Sorted::of(&leased, outcomes);
            report.relayed.failed += sorted.report.failed;
            report.relayed.rejected += sorted.report.rejected;
            settle(
                &self.store,
                &config.owner,
                &leased,
                &sorted,
                &mut report.relayed,
            )
            .await?;
            if (leased.len() as i64) < config.batch || away {
                return Ok(());
            }
        }
        Ok(())
    }
}

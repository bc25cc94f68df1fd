//! A pass's claimed rows of lib-streaming's outbox, from the claim to their settling: published,
//! settled one by one, and whatever cannot be settled given back for any relay to take at once.
//!
//! A claim holds its rows `PROCESSING` under its token. lib-commons abandons them when its pass
//! fails after the claim (they wait its 10-minute takeover, or a `FAILED` row its 5-minute
//! retry); here a pass gives them back (`outbox_claim::release`, guarded by the token, so a row
//! another relay took over is never touched), and a claim it cannot give back (the server is
//! away) is held (`mongostate::held_claims`) and given back first thing at the next pass. The
//! relay right after a commit settles its rows the same way ([`after_give_back`]), and its held
//! claims are the same list, given back by the same pass.

use chrono::Utc;
use mongostate::held_claims::OpenClaim;
use mongostate::outbox::{OutboxRow, RowStatus};
use mongostate::outbox_claim::{self, Claimed};
use mongostate::{outbox_event, to_outbox, ManagerStore};
use outbox::OutboxError;

use super::{ManagerPassReport, ManagerRepairer};
use crate::relay::Sorted;
use crate::sink::SinkPublisher;

const STEP: &str = "settling relayed Manager outbox rows";

/// A row's settling failed with `error`, and giving the row back answered `given_back`. The
/// first failure of the pass (or publish) is kept in `failure`, to end with. When the giving
/// back failed too the server is away: `open` (the claims whose rows may still be unsettled) is
/// held for the repairer's next pass, and `Err` with that first failure says to stop settling.
pub(super) fn after_give_back<T>(
    store: &ManagerStore,
    given_back: mongostate::Result<T>,
    open: impl IntoIterator<Item = OpenClaim>,
    error: OutboxError,
    failure: &mut Option<OutboxError>,
) -> Result<(), OutboxError> {
    let first = failure.take().unwrap_or(error);
    match given_back {
        Ok(_) => {
            *failure = Some(first);
            Ok(())
        }
        Err(_) => {
            // The same outage as `first`, which the caller reports: not logged twice.
            store.held_claims().hold(open);
            Err(first)
        }
    }
}

impl ManagerRepairer {
    /// Gives back the claims an earlier pass, or the relay right after a commit, could not (the
    /// server was away): their rows still under its token become `PENDING`. The number of rows
    /// given back; at the first failure that claim and the rest stay held.
    pub async fn give_back_held(&self) -> Result<u64, OutboxError> {
        let held = self.store.held_claims();
        held.give_back(self.store.store())
            .await
            .map_err(|e| to_outbox(STEP, e))
    }

    /// Publishes the rows of `claimed` (of `tenant`) and settles each as lib-commons does, one
    /// by one. A row whose settling fails is given back and the rest settled; the pass then
    /// fails with the first error. When the server refuses the giving back too, the claim is
    /// held (`mongostate::held_claims`) and the pass stops at once.
    pub(super) async fn relay_claimed(
        &self,
        claimed: Claimed,
        tenant: &str,
        report: &mut ManagerPassReport,
    ) -> Result<(), OutboxError> {
        let claim = OpenClaim {
            tenant: tenant.to_owned(),
            token: claimed.token,
        };
        let mut failure = None;
        let store = self.store.store();
        let mut sendable = Vec::with_capacity(claimed.rows.len());
        let mut events = Vec::with_capacity(claimed.rows.len());
        for row in claimed.rows {
            match outbox_event::pending_event(&row, None) {
                Ok(event) => {
                    let exchange = row.envelope().map(|e| e.exchange).unwrap_or_default();
                    if exchange != self.publisher.exchange() {
                        let error = format!("the row's exchange {exchange:?} is not this relay's");
                        match outbox_claim::mark_failed(store, &row, &error, Utc::now()).await {
                            Ok(_) => report.relayed.failed += 1,
                            Err(e) => self.give_back(&claim, &row, e, &mut failure).await?,
                        }
                        continue;
                    }
                    events.push(event);
                    sendable.push(row);
                }
                Err(error) => {
                    tracing::warn!(outbox.id = %row.id, %error, "Outbox row cannot be published; marked invalid.");
                    let marked =
                        outbox_claim::mark_invalid(store, &row, &error.to_string(), Utc::now())
                            .await;
                    match marked {
                        Ok(marked) => report.invalid += u64::from(marked),
                        Err(e) => self.give_back(&claim, &row, e, &mut failure).await?,
                    }
                }
            }
        }
        if events.is_empty() {
            return failure.map_or(Ok(()), Err);
        }
        // A row carries no request id: the one this Worker kept with the job, as the PostgreSQL
        // mode republishes its events with theirs. Without it nothing is published: every row
        // still held goes back.
        let jobs: Vec<_> = events.iter().map(|e| e.job_id).collect();
        let request_ids = match self.store.request_ids(&jobs).await {
            Ok(found) => found,
            Err(error) => {
                self.give_back_all(&claim).await;
                return Err(failure.unwrap_or(error));
            }
        };
        for event in &mut events {
            event.event.request_id = request_ids.get(&event.job_id).cloned();
        }
        let publisher = SinkPublisher::from(self.publisher.clone());
        let outcomes = publisher.send(&events).await;
        let sorted = Sorted::of(&events, outcomes);
        report.relayed.failed += sorted.report.failed;
        report.relayed.rejected += sorted.report.rejected;
        let now = Utc::now();
        for (row, event) in sendable.iter().zip(&events) {
            // A row whose publish was confirmed and whose mark failed is given back like the
            // others: the next relay to take it publishes it again, so it is not lost (at least
            // once; the consumer dedupes on its ce-id). A mark whose answer alone was lost left
            // the row PUBLISHED without a token, which the giving back does not touch.
            if sorted.confirmed.contains(&event.id) {
                match outbox_claim::mark_published(store, row, now).await {
                    Ok(marked) => report.relayed.published += u64::from(marked),
                    Err(e) => self.give_back(&claim, row, e, &mut failure).await?,
                }
            } else if let Some(failed) = sorted.unpublished.iter().find(|u| u.id == event.id) {
                // Given back instead of FAILED, its attempt is not counted and it is retried at
                // once rather than after the retry delay.
                match outbox_claim::mark_failed(store, row, &failed.error, now).await {
                    Ok(Some(RowStatus::Invalid)) => report.invalid += 1,
                    Ok(_) => {}
                    Err(e) => self.give_back(&claim, row, e, &mut failure).await?,
                }
            }
        }
        failure.map_or(Ok(()), Err)
    }

    /// `row`, whose settling failed with `error`, given back at once (see [`after_give_back`]).
    /// When the server refuses that too, the claim is held for the next pass, and the pass
    /// stops here.
    async fn give_back(
        &self,
        claim: &OpenClaim,
        row: &OutboxRow,
        error: mongostate::Error,
        failure: &mut Option<OutboxError>,
    ) -> Result<(), OutboxError> {
        let store = self.store.store();
        let released = outbox_claim::release(
            store,
            &claim.tenant,
            &claim.token,
            Some(&row.id),
            Utc::now(),
        )
        .await;
        let error = to_outbox(STEP, error);
        after_give_back(&self.store, released, [claim.clone()], error, failure)
    }

    /// Every row the claim still holds, given back; held for the next pass when it cannot be.
    async fn give_back_all(&self, claim: &OpenClaim) {
        let store = self.store.store();
        let released =
            outbox_claim::release(store, &claim.tenant, &claim.token, None, Utc::now()).await;
        if released.is_err() {
            self.store.held_claims().hold([claim.clone()]);
        }
    }
}

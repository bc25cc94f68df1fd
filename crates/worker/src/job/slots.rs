//! A run's admission to its capped datasources (`DATASOURCE_<NAME>_MAX_CONCURRENT`): before a
//! capped datasource is read, the run takes one of its slots in the state database
//! ([`SlotStore`]), polling with capped, jittered waits while none is free; it renews the slot
//! as it renews its claim and frees it when the read ends. The execution stays `QUEUED` while
//! it waits (the engine tells the observer only once admitted), and the wait is inside the
//! extraction's time limit and stops (`engine::Admission`'s obligations).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use engine::{Admission, Permit};
use futures_util::future::BoxFuture;
use outbox::SlotHolder;
use tokio::time::Instant;
use uuid::Uuid;

use super::ports::SlotStore;
use crate::metrics;

/// How often a run asks again for a slot: from 50 ms doubling to 1 s, with full jitter, so the
/// runs of several replicas waiting on one datasource spread their asks (at most about one
/// statement a second each).
const WAIT_BACKOFF: outbox::Backoff = outbox::Backoff {
    base: Duration::from_millis(50),
    cap: Duration::from_secs(1),
};

/// The capped datasources of one run, and where their slots are.
pub(super) struct SlotGate {
    pub(super) slots: Arc<dyn SlotStore>,
    /// The caps, by connection name; a datasource not here is read at once.
    pub(super) caps: Arc<BTreeMap<String, u32>>,
    /// The run's claim owner: the slot's holder.
    pub(super) owner: String,
    pub(super) job_id: Uuid,
    /// A slot's lease (the claim's), renewed every third of it.
    pub(super) lease: Duration,
}

impl Admission for SlotGate {
    fn admit<'a>(&'a self, datasource: &'a str) -> BoxFuture<'a, Permit> {
        Box::pin(async move {
            let Some(&cap) = self.caps.get(datasource) else {
                return Box::new(()) as Permit;
            };
            Box::new(self.take(datasource, cap).await) as Permit
        })
    }
}

impl SlotGate {
    /// Waits for one of `datasource`'s `cap` slots. A state database that does not answer is
    /// asked again like a full datasource: the job's timeout bounds the wait either way.
    async fn take(&self, datasource: &str, cap: u32) -> Held {
        let job_id = self.job_id;
        let waiting = Instant::now();
        // Dropped before a slot is held (a timeout, a forced cancel): frees what a take whose
        // answer was lost may have taken.
        let mut abandoned = Abandoned(Some(self.release_of(datasource)));
        let mut asks = 0;
        let mut counted = false;
        loop {
            let holder = SlotHolder {
                owner: &self.owner,
                job_id,
            };
            match self
                .slots
                .take_slot(datasource, cap, holder, self.lease)
                .await
            {
                Ok(Some(slot)) => {
                    abandoned.0 = None;
                    let waited = waiting.elapsed();
                    metrics::slot_taken(datasource, waited);
                    if counted {
                        tracing::info!(%job_id, datasource, slot, waited_ms = waited.as_millis() as u64, "Took a slot of the capped datasource; reading it.");
                    }
                    return self.hold(datasource);
                }
                Ok(None) if !counted => {
                    counted = true;
                    metrics::slot_wait(datasource);
                    tracing::info!(%job_id, datasource, cap, "Every slot of the capped datasource is held; the datasource waits, queued.");
                }
                Ok(None) => {}
                // Once, then every tenth ask: an outage of the state database is loud enough.
                Err(error) if asks % 10 == 0 => {
                    tracing::warn!(%job_id, datasource, %error, asks, "Could not take a slot of the capped datasource; asking again.");
                }
                Err(_) => {}
            }
            asks += 1;
            tokio::time::sleep(WAIT_BACKOFF.delay(asks)).await;
        }
    }

    /// The slot just taken, renewed until it is dropped.
    fn hold(&self, datasource: &str) -> Held {
        metrics::slot_held(datasource, 1.0);
        let renewal = tokio::spawn(renew(
            self.slots.clone(),
            datasource.to_owned(),
            self.owner.clone(),
            self.job_id,
            self.lease,
        ));
        Held {
            renewal,
            release: Some(self.release_of(datasource)),
        }
    }

    fn release_of(&self, datasource: &str) -> Release {
        Release {
            slots: self.slots.clone(),
            datasource: datasource.to_owned(),
            owner: self.owner.clone(),
        }
    }
}

/// Renews the slot every third of its lease; stops once it is no longer held.
async fn renew(
    slots: Arc<dyn SlotStore>,
    datasource: String,
    owner: String,
    job_id: Uuid,
    lease: Duration,
) {
    let mut ticks = tokio::time::interval(lease / 3);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        match slots.renew_slot(&datasource, &owner, lease).await {
            Ok(true) => {}
            Ok(false) => {
                // Its lease lapsed (the state database did not answer for a whole lease) and
                // another run may hold it now: the read goes on, once over the cap.
                tracing::warn!(%job_id, %datasource, "The datasource's slot lapsed before its read ended; the read goes on.");
                return;
            }
            Err(error) => {
                tracing::warn!(%job_id, %datasource, %error, "Could not renew the datasource's slot; retrying.");
            }
        }
    }
}

/// Frees a run's slot of a datasource, after the read, on a task of its own (a drop cannot
/// wait); a release that fails leaves the slot to lapse.
struct Release {
    slots: Arc<dyn SlotStore>,
    datasource: String,
    owner: String,
}

impl Release {
    fn spawn(self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            if let Err(error) = self.slots.release_slot(&self.datasource, &self.owner).await {
                let datasource = &self.datasource;
                tracing::warn!(%datasource, %error, "Could not free the datasource's slot; it is free once its lease lapses.");
            }
        });
    }
}

/// A slot held for a datasource's read: renewed while it lives, freed when dropped.
struct Held {
    renewal: tokio::task::JoinHandle<()>,
    release: Option<Release>,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.renewal.abort();
        if let Some(release) = self.release.take() {
            metrics::slot_held(&release.datasource, -1.0);
            release.spawn();
        }
    }
}

/// A wait for a slot, until it holds one.
struct Abandoned(Option<Release>);

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(release) = self.0.take() {
            release.spawn();
        }
    }
}

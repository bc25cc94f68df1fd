//! A run's admission to capped datasources on an in-memory slot store, the clock paused: N
//! slots taken, the N+1th read waits until one is given back; a held slot is renewed every
//! third of its lease and freed when its read ends; a wait abandoned (timeout, forced cancel)
//! frees what a take may have left; an uncapped datasource never asks.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use engine::Admission;
use outbox::{OutboxError, SlotHolder};

use super::super::ports::SlotStore;
use super::super::slots::SlotGate;

const LEASE: Duration = Duration::from_secs(30);

/// Slots by datasource, each held by an owner; and the calls made.
#[derive(Default)]
struct Slots(Mutex<SlotsState>);

#[derive(Default)]
struct SlotsState {
    held: BTreeMap<String, Vec<String>>,
    takes: u32,
    renewals: u32,
    releases: u32,
}

impl Slots {
    fn state<T>(&self, read: impl FnOnce(&SlotsState) -> T) -> T {
        read(&self.0.lock().unwrap())
    }
}

#[async_trait]
impl SlotStore for Slots {
    async fn take_slot(
        &self,
        datasource: &str,
        slots: u32,
        holder: SlotHolder<'_>,
        _: Duration,
    ) -> Result<Option<u32>, OutboxError> {
        let mut state = self.0.lock().unwrap();
        state.takes += 1;
        let held = state.held.entry(datasource.to_owned()).or_default();
        if held.len() as u32 >= slots {
            return Ok(None);
        }
        held.push(holder.owner.to_owned());
        Ok(Some(held.len() as u32 - 1))
    }

    async fn renew_slot(
        &self,
        datasource: &str,
        owner: &str,
        _: Duration,
    ) -> Result<bool, OutboxError> {
        let mut state = self.0.lock().unwrap();
        state.renewals += 1;
        Ok(state
            .held
            .get(datasource)
            .is_some_and(|held| held.iter().any(|o| o == owner)))
    }

    async fn release_slot(&self, datasource: &str, owner: &str) -> Result<(), OutboxError> {
        let mut state = self.0.lock().unwrap();
        state.releases += 1;
        if let Some(held) = state.held.get_mut(datasource) {
            held.retain(|o| o != owner);
        }
        Ok(())
    }
}

/// A run's gate: `ledger` capped at `cap`, `crm` not.
fn gate(slots: &Arc<Slots>, owner: &str, cap: u32) -> Arc<SlotGate> {
    Arc::new(SlotGate {
        slots: slots.clone(),
        caps: Arc::new(BTreeMap::from([("ledger".to_owned(), cap)])),
        owner: owner.to_owned(),
        job_id: uuid::Uuid::new_v4(),
        lease: LEASE,
    })
}

/// Lets spawned tasks (renewals, releases) run.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn the_read_past_the_cap_waits_until_a_slot_is_given_back() {
    let slots = Arc::new(Slots::default());
    let first = gate(&slots, "run-a", 2).admit("ledger").await;
    let second = gate(&slots, "run-b", 2).admit("ledger").await;
    let third_gate = gate(&slots, "run-c", 2);
    let third = tokio::spawn(async move { third_gate.admit("ledger").await });

    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        !third.is_finished(),
        "two slots, both held: the third waits"
    );
    let asks = slots.state(|s| s.takes);
    assert!(asks > 5, "it asks again while it waits: {asks} takes");

    drop(first);
    settle().await;
    assert_eq!(slots.state(|s| s.held["ledger"].clone()), ["run-b"]);
    let third = tokio::time::timeout(Duration::from_secs(2), third)
        .await
        .expect("admitted within the backoff's cap")
        .expect("task");
    assert_eq!(
        slots.state(|s| s.held["ledger"].clone()),
        ["run-b", "run-c"]
    );
    drop((second, third));
    settle().await;
    assert!(slots.state(|s| s.held["ledger"].is_empty()));
}

#[tokio::test(start_paused = true)]
async fn a_held_slot_is_renewed_every_third_of_its_lease_until_its_read_ends() {
    let slots = Arc::new(Slots::default());
    let permit = gate(&slots, "run-a", 1).admit("ledger").await;
    tokio::time::sleep(LEASE + Duration::from_secs(1)).await;
    assert_eq!(slots.state(|s| s.renewals), 3);
    drop(permit);
    settle().await;
    tokio::time::sleep(LEASE).await;
    assert_eq!(slots.state(|s| s.renewals), 3, "no renewal once freed");
    assert_eq!(slots.state(|s| s.releases), 1);
}

#[tokio::test(start_paused = true)]
async fn an_abandoned_wait_frees_what_its_take_may_have_left() {
    let slots = Arc::new(Slots::default());
    let _held = gate(&slots, "run-a", 1).admit("ledger").await;
    let waiting = gate(&slots, "run-b", 1);
    let waited = tokio::time::timeout(Duration::from_secs(5), waiting.admit("ledger")).await;
    assert!(waited.is_err(), "still waiting when the job's time ran out");
    settle().await;
    assert_eq!(
        slots.state(|s| s.releases),
        1,
        "run-b's release, just in case"
    );
    assert_eq!(slots.state(|s| s.held["ledger"].clone()), ["run-a"]);
}

#[tokio::test(start_paused = true)]
async fn an_uncapped_datasource_is_admitted_without_asking() {
    let slots = Arc::new(Slots::default());
    let _permit = gate(&slots, "run-a", 1).admit("crm").await;
    assert_eq!(slots.state(|s| (s.takes, s.releases)), (0, 0));
}

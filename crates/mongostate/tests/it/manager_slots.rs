//! The capped datasources' slots in the Manager mode (`fetcher_worker_slots`): taken up to the
//! cap, renewed, released, lapsing, and never more live holders than slots however many takers
//! race.

use std::collections::BTreeSet;

use mongodb::bson::{doc, Document};
use mongostate::ManagerStore;
use outbox::SlotHolder;
use uuid::Uuid;

use crate::manager_world::{World, LEASE};

fn holder(owner: &str) -> SlotHolder<'_> {
    SlotHolder {
        owner,
        job_id: Uuid::new_v4(),
    }
}

/// Takes a slot, asking again while a race was lost but a slot is still free.
async fn take(store: &ManagerStore, datasource: &str, slots: u32, owner: &str) -> Option<u32> {
    for _ in 0..20 {
        let taken = store
            .take_slot(datasource, slots, holder(owner), LEASE)
            .await
            .expect("take");
        if taken.is_some() {
            return taken;
        }
        if live(store, datasource).await >= u64::from(slots) {
            return None;
        }
    }
    panic!("a free slot of {datasource} was never taken");
}

async fn live(store: &ManagerStore, datasource: &str) -> u64 {
    let now = mongodb::bson::DateTime::now();
    store
        .store()
        .slot_rows()
        .count_documents(doc! {"datasource": datasource, "expires_at": {"$gt": now}})
        .await
        .expect("count")
}

#[tokio::test]
async fn n_slots_are_taken_then_the_next_taker_waits_until_one_is_released() {
    let world = World::new().await;
    let store = &world.store;
    let mut taken = BTreeSet::new();
    for owner in ["run-a", "run-b", "run-c"] {
        taken.insert(take(store, "ledger", 3, owner).await.expect("a free slot"));
    }
    assert_eq!(taken, BTreeSet::from([0, 1, 2]), "each slot once");
    assert_eq!(take(store, "ledger", 3, "run-d").await, None, "all held");
    assert!(take(store, "crm", 3, "run-d").await.is_some(), "crm's own");

    store
        .release_slot("ledger", "run-x")
        .await
        .expect("release");
    assert_eq!(take(store, "ledger", 3, "run-d").await, None);
    store
        .release_slot("ledger", "run-b")
        .await
        .expect("release");
    assert!(take(store, "ledger", 3, "run-d").await.is_some());
    assert_eq!(live(store, "ledger").await, 3);
    world.db.drop().await;
}

#[tokio::test]
async fn a_renewed_slot_stays_held_and_a_lapsed_one_is_taken_over() {
    let world = World::new().await;
    let store = &world.store;
    let slot = take(store, "ledger", 1, "run-a").await.expect("free");
    assert!(store
        .renew_slot("ledger", "run-a", LEASE)
        .await
        .expect("renew"));
    assert!(!store
        .renew_slot("ledger", "run-b", LEASE)
        .await
        .expect("renew"));
    assert_eq!(take(store, "ledger", 1, "run-b").await, None);

    // Its Worker died: the lease lapses and the slot is free to the next taker.
    let past = mongodb::bson::DateTime::from_millis(0);
    store
        .store()
        .slot_rows()
        .update_many(doc! {}, doc! {"$set": {"expires_at": past}})
        .await
        .expect("lapse");
    assert_eq!(take(store, "ledger", 1, "run-b").await, Some(slot));
    assert!(
        !store
            .renew_slot("ledger", "run-a", LEASE)
            .await
            .expect("renew"),
        "the old holder learns it lost the slot"
    );
    store
        .release_slot("ledger", "run-a")
        .await
        .expect("release");
    assert_eq!(live(store, "ledger").await, 1, "run-b's slot stays");
    let rows: Vec<Document> = {
        let mut cursor = store.store().slot_rows().find(doc! {}).await.expect("find");
        let mut rows = Vec::new();
        while cursor.advance().await.expect("advance") {
            rows.push(cursor.deserialize_current().expect("row"));
        }
        rows
    };
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get_str("owner").expect("owner"), "run-b");
    world.db.drop().await;
}

#[tokio::test]
async fn racing_takers_never_hold_more_slots_than_the_cap() {
    let world = World::new().await;
    let takers = (0..24).map(|i| {
        let store = world.store.clone();
        tokio::spawn(async move {
            let owner = format!("run-{i}");
            store
                .take_slot("ledger", 2, holder(&owner), LEASE)
                .await
                .expect("take")
        })
    });
    let mut slots = Vec::new();
    for taker in takers {
        if let Some(slot) = taker.await.expect("taker") {
            slots.push(slot);
        }
    }
    assert!(!slots.is_empty() && slots.len() <= 2, "{slots:?}");
    slots.sort_unstable();
    slots.dedup();
    assert!(slots.len() <= 2);
    assert!(live(&world.store, "ledger").await <= 2);
    world.db.drop().await;
}

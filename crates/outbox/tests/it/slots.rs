//! The slots of capped datasources: taken up to the cap, renewed, released, lapsing, and never
//! more live holders than slots however many takers race.

use std::collections::BTreeSet;
use std::time::Duration;

use outbox::{SlotHolder, Store};
use uuid::Uuid;

use crate::support::{TestDb, LONG};

fn holder(owner: &str) -> SlotHolder<'_> {
    SlotHolder {
        owner,
        job_id: Uuid::new_v4(),
    }
}

/// Lets every lease of `datasource`'s slots lapse, as if their Worker had died.
async fn lapse(db: &TestDb, datasource: &str) {
    sqlx::query(
        "UPDATE datasource_slots SET expires_at = now() - interval '1 second'
         WHERE datasource = $1",
    )
    .bind(datasource)
    .execute(db.pool())
    .await
    .expect("lapse");
}

async fn live(db: &TestDb, datasource: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM datasource_slots WHERE datasource = $1 AND expires_at > now()",
    )
    .bind(datasource)
    .fetch_one(db.pool())
    .await
    .expect("count")
}

/// Takes a slot, asking again while a race was lost but a slot is still free.
async fn take(store: &Store, datasource: &str, slots: u32, owner: &str) -> Option<u32> {
    for _ in 0..20 {
        let taken = store
            .take_slot(datasource, slots, holder(owner), LONG)
            .await
            .expect("take");
        if taken.is_some() {
            return taken;
        }
        let held: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM datasource_slots WHERE datasource = $1 AND expires_at > now()",
        )
        .bind(datasource)
        .fetch_one(store.pool())
        .await
        .expect("count");
        if held >= i64::from(slots) {
            return None;
        }
    }
    panic!("a free slot of {datasource} was never taken");
}

#[tokio::test]
async fn n_slots_are_taken_then_the_next_taker_waits_until_one_is_released() {
    let db = TestDb::migrated().await;
    let mut taken = BTreeSet::new();
    for owner in ["run-a", "run-b", "run-c"] {
        let slot = take(&db.store, "ledger", 3, owner)
            .await
            .expect("a free slot");
        taken.insert(slot);
    }
    assert_eq!(taken, BTreeSet::from([0, 1, 2]), "each slot once");
    assert_eq!(
        take(&db.store, "ledger", 3, "run-d").await,
        None,
        "all held"
    );
    // Another datasource's slots are its own.
    assert!(take(&db.store, "crm", 3, "run-d").await.is_some());

    // A release by someone else frees nothing; the holder's frees its slot.
    let slot_b: i32 = sqlx::query_scalar("SELECT slot FROM datasource_slots WHERE owner = 'run-b'")
        .fetch_one(db.pool())
        .await
        .expect("run-b's slot");
    let slot_b = u32::try_from(slot_b).expect("slot");
    db.store
        .release_slot("ledger", "run-x")
        .await
        .expect("release");
    assert_eq!(take(&db.store, "ledger", 3, "run-d").await, None);
    db.store
        .release_slot("ledger", "run-b")
        .await
        .expect("release");
    assert_eq!(take(&db.store, "ledger", 3, "run-d").await, Some(slot_b));
    assert_eq!(live(&db, "ledger").await, 3);
    db.drop().await;
}

#[tokio::test]
async fn a_renewed_slot_stays_held_and_a_lapsed_one_is_taken_over() {
    let db = TestDb::migrated().await;
    let slot = take(&db.store, "ledger", 1, "run-a").await.expect("free");
    assert!(db
        .store
        .renew_slot("ledger", "run-a", LONG)
        .await
        .expect("renew"));
    assert!(
        !db.store
            .renew_slot("ledger", "run-b", LONG)
            .await
            .expect("renew"),
        "not run-b's"
    );
    assert_eq!(take(&db.store, "ledger", 1, "run-b").await, None);

    // Its Worker died: the lease lapses and the slot is free to the next taker.
    lapse(&db, "ledger").await;
    assert_eq!(live(&db, "ledger").await, 0);
    assert_eq!(take(&db.store, "ledger", 1, "run-b").await, Some(slot));
    assert!(
        !db.store
            .renew_slot("ledger", "run-a", LONG)
            .await
            .expect("renew"),
        "the old holder learns it lost the slot"
    );
    // The old holder's release leaves the new holder's slot alone.
    db.store
        .release_slot("ledger", "run-a")
        .await
        .expect("release");
    assert_eq!(live(&db, "ledger").await, 1);

    // A renewal past the lapse keeps the slot: a short lease renewed in time never lapses.
    db.store
        .renew_slot("ledger", "run-b", Duration::from_secs(60))
        .await
        .expect("renew");
    assert_eq!(take(&db.store, "ledger", 1, "run-c").await, None);
    db.drop().await;
}

#[tokio::test]
async fn racing_takers_never_hold_more_slots_than_the_cap() {
    let db = TestDb::migrated().await;
    let store = db.store_with(16).await;
    let takers = (0..32).map(|i| {
        let store = store.clone();
        tokio::spawn(async move {
            let owner = format!("run-{i}");
            store
                .take_slot("ledger", 2, holder(&owner), LONG)
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
    slots.sort_unstable();
    assert!(slots.len() <= 2, "at most the cap: {slots:?}");
    slots.dedup();
    assert!(slots.len() <= 2);
    assert!(!slots.is_empty(), "someone took a slot");
    assert!(live(&db, "ledger").await <= 2);
    db.drop().await;
}

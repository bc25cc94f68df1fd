//! Two repairers on one database draining one backlog at the same time (two Worker processes:
//! a store, a publisher and a broker connection each).

use std::sync::Arc;
use std::time::{Duration, Instant};

use repairer::{PassReport, Repairer};
use tokio::sync::Barrier;
use tokio_util::sync::CancellationToken;

use crate::support::{self, Broker, TestDb};

const BACKLOG: usize = 2_000;
const BATCH: i64 = 25;

/// What one repairer did over its loop of passes.
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    passes: u64,
    leased: u64,
    published: u64,
    failed: u64,
}

impl Totals {
    fn add(&mut self, pass: &PassReport) {
        self.passes += 1;
        self.leased += pass.leased;
        self.published += pass.relayed.published;
        self.failed += pass.relayed.failed;
    }
}

/// The outcome of one run: both repairers' totals, what the consumer received, how long.
struct Run {
    totals: [Totals; 2],
    deliveries: usize,
    duplicates: usize,
    distinct: usize,
    elapsed: Duration,
}

/// Records the backlog, runs two `repair_once` loops concurrently until the outbox is empty,
/// then counts what reached the queue.
async fn two_repairers(lease: Duration) -> Run {
    let mut db = TestDb::migrated().await;
    let broker = Broker::connect().await;
    let exchange = support::unique("exchange");
    broker.declare_exchange(&exchange).await;
    let queue = broker.bound_queue(&exchange, "job.*").await;

    let recorded =
        support::record_many(&db.store, BACKLOG, 8, support::mixed, Duration::ZERO).await;
    let expected = support::by_ce_id(&recorded);

    let start = Arc::new(Barrier::new(2));
    let mut tasks = Vec::new();
    let mut publishers = Vec::new();
    for owner in ["repairer-a", "repairer-b"] {
        let store = db.another_store(4).await;
        let publisher = support::publisher(&exchange);
        publishers.push(publisher.clone());
        let mut config = support::config(owner, BATCH);
        config.lease = lease;
        let repairer = Repairer::new(store.clone(), publisher, config);
        let start = start.clone();
        tasks.push(tokio::spawn(async move {
            let stop = CancellationToken::new();
            let mut totals = Totals::default();
            start.wait().await;
            loop {
                let pass = repairer.repair_once(&stop).await.expect("repair pass");
                totals.add(&pass);
                if support::unpublished_count(store.pool()).await == 0 {
                    return totals;
                }
                if pass.leased == 0 {
                    // The other one holds the rest; its leases end or it marks them.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                assert!(totals.passes < 10_000, "no end in sight: {totals:?}");
            }
        }));
    }
    let started = Instant::now();
    let mut totals = [Totals::default(); 2];
    for (slot, task) in totals.iter_mut().zip(tasks) {
        *slot = task.await.expect("repairer task");
    }
    let elapsed = started.elapsed();

    // Every publish was confirmed before its row was marked: all copies are in the queue now.
    let depth = broker.depth(&queue).await as usize;
    let deliveries = broker.receive(&queue, depth, Duration::from_secs(60)).await;
    let (duplicates, seen) = support::duplicates(&deliveries);
    for ce_id in expected.keys() {
        assert!(seen.contains_key(ce_id), "{ce_id} never arrived");
    }
    assert_eq!(seen.len(), BACKLOG, "only recorded events arrive");
    for delivery in deliveries.iter().step_by(97) {
        let recorded = expected[&support::ce_id(delivery)];
        support::assert_delivered_as_recorded(delivery, &recorded.event, &exchange);
    }
    let rows = support::outbox_rows(db.pool()).await;
    assert!(rows.iter().all(|r| r.published_at.is_some()));
    assert!(rows.iter().all(|r| r.leased_by.is_none()));

    for publisher in publishers {
        publisher.close().await;
    }
    broker.close().await;
    db.drop().await;
    Run {
        totals,
        deliveries: deliveries.len(),
        duplicates,
        distinct: seen.len(),
        elapsed,
    }
}

fn report(label: &str, run: &Run) {
    let [a, b] = run.totals;
    println!(
        "{label}: {BACKLOG} rows, batch {BATCH}, two repairers in {:.2?}: \
         a published {} (leased {}, {} passes), b published {} (leased {}, {} passes); \
         consumer got {} deliveries, {} distinct ce-ids, {} duplicates",
        run.elapsed,
        a.published,
        a.leased,
        a.passes,
        b.published,
        b.leased,
        b.passes,
        run.deliveries,
        run.distinct,
        run.duplicates,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_leases_longer_than_a_publish_no_event_is_published_twice() {
    let run = two_repairers(Duration::from_secs(60)).await;
    report("leases of 60 s", &run);
    let [a, b] = run.totals;
    assert!(
        a.published > 0 && b.published > 0,
        "both repairers took part"
    );
    // No row leased to both, so no row marked by both and no row published by both.
    assert_eq!(a.leased + b.leased, BACKLOG as u64);
    assert_eq!(a.published + b.published, BACKLOG as u64);
    assert_eq!(a.failed + b.failed, 0);
    assert_eq!(run.duplicates, 0);
    assert_eq!(run.deliveries, BACKLOG);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_leases_shorter_than_a_publish_every_event_still_arrives() {
    // A lease that ends before the batch's confirms are in: the other repairer may take the
    // row and publish it too. At least once still holds; the duplicates are what it costs.
    let run = two_repairers(Duration::from_millis(1)).await;
    report("leases of 1 ms", &run);
    let [a, b] = run.totals;
    assert_eq!(
        run.deliveries,
        BACKLOG + run.duplicates,
        "each delivery beyond the first of a ce-id is a duplicate"
    );
    // Each row is marked published once, by the repairer holding it when its confirm came.
    assert_eq!(a.published + b.published, BACKLOG as u64);
}

//! One failing event does not stop a pass: the others in its batch, and the batches behind it,
//! are still published.

use std::time::Duration;

use contract::event::TerminalStatus;
use repairer::Repairer;
use tokio_util::sync::CancellationToken;

use crate::support::{self, Spec};

fn alternating(i: usize) -> Spec<'static> {
    Spec {
        status: if i.is_multiple_of(2) {
            TerminalStatus::Completed
        } else {
            TerminalStatus::Failed
        },
        ..support::mixed(i)
    }
}

fn failed_first(i: usize) -> Spec<'static> {
    Spec {
        status: if i < 10 {
            TerminalStatus::Failed
        } else {
            TerminalStatus::Completed
        },
        ..support::mixed(i)
    }
}

/// Records 20 events (`spec`), binds a queue to `job.completed` only, runs one pass in batches
/// of `batch`, and checks that exactly the completed events were published and received.
async fn one_pass_with_only_completed_events_routable(
    spec: fn(usize) -> Spec<'static>,
    batch: i64,
) {
    let (db, broker, exchange, publisher) = support::start().await;
    let queue = broker.bound_queue(&exchange, "job.completed").await;

    let recorded = support::record_many(&db.store, 20, 1, spec, Duration::ZERO).await;
    let repairer = Repairer::new(
        db.store.clone(),
        publisher.clone(),
        support::config("repairer-partial", batch),
    );
    let pass = repairer
        .repair_once(&CancellationToken::new())
        .await
        .expect("pass");
    println!("batch {batch}: {pass:?}");
    assert_eq!(pass.leased, 20, "{pass:?}");
    assert_eq!(pass.relayed.published, 10, "{pass:?}");
    assert_eq!(pass.relayed.failed, 10, "{pass:?}");
    assert_eq!(pass.relayed.rejected, 10, "{pass:?}");

    let rows = support::outbox_rows(db.pool()).await;
    for row in &rows {
        let completed = row.ce_id.starts_with("fetcher.job.completed.");
        assert_eq!(row.published_at.is_some(), completed, "{row:?}");
        assert_eq!(row.last_error.is_some(), !completed, "{row:?}");
    }
    let received = broker.receive(&queue, 10, Duration::from_secs(10)).await;
    support::assert_all_delivered_as_recorded(&received, &recorded, &exchange);
    assert_eq!(broker.depth(&queue).await, 0);

    support::finish(publisher, broker, db).await;
}

#[tokio::test]
async fn routable_events_in_a_batch_with_unroutable_ones_are_published() {
    one_pass_with_only_completed_events_routable(alternating, 4).await;
}

#[tokio::test]
async fn batches_returned_whole_do_not_stop_the_pass() {
    // The first two batches of 5 are failed events nobody consumes: returned whole. The broker
    // answered, so the pass goes on to the completed events behind them.
    one_pass_with_only_completed_events_routable(failed_first, 5).await;
}

#[tokio::test]
async fn an_event_that_cannot_be_sent_fails_alone() {
    let (db, broker, exchange, publisher) = support::start().await;
    let queue = broker.bound_queue(&exchange, "job.*").await;

    // A ce-id too long for an AMQP message id, recorded by hand between good events.
    let before = support::record_many(&db.store, 3, 1, support::mixed, Duration::ZERO).await;
    let job_id = uuid::Uuid::new_v4();
    let (outcome, mut event) = support::outcome(job_id, 3, support::mixed(3));
    event.attributes.id = format!("{}.{}", event.attributes.id, "x".repeat(300));
    support::claim(&db.store, job_id, support::mixed(3).tenant).await;
    let bad = db
        .store
        .record_terminal(&outbox::TerminalRecord {
            job_id,
            owner: Some(support::RECORDER),
            tenant: support::mixed(3).tenant,
            outcome,
            event: &event,
            metadata: &Default::default(),
            leaves_object: false,
            publisher: support::RECORDER,
            lease: Duration::ZERO,
            executions: &[],
            close: Some(outbox::Close::CANCELED),
        })
        .await
        .expect("record");
    assert!(matches!(bad, outbox::Recorded::Inserted { .. }), "{bad:?}");
    let after = support::record_many(&db.store, 3, 1, support::mixed, Duration::ZERO).await;

    let repairer = Repairer::new(
        db.store.clone(),
        publisher.clone(),
        support::config("repairer-bad-row", 25),
    );
    let pass = repairer
        .repair_once(&CancellationToken::new())
        .await
        .expect("pass");
    assert_eq!(pass.leased, 7, "{pass:?}");
    assert_eq!(pass.relayed.published, 6, "{pass:?}");
    assert_eq!(pass.relayed.failed, 1, "{pass:?}");

    let rows = support::outbox_rows(db.pool()).await;
    for row in &rows {
        if row.ce_id == event.attributes.id {
            assert!(row.published_at.is_none());
            let error = row.last_error.as_deref().unwrap_or_default();
            assert!(error.contains("cannot build the AMQP message"), "{error}");
        } else {
            assert!(row.published_at.is_some(), "{row:?}");
        }
    }
    let received = broker.receive(&queue, 6, Duration::from_secs(10)).await;
    let good = [before, after].concat();
    support::assert_all_delivered_as_recorded(&received, &good, &exchange);

    support::finish(publisher, broker, db).await;
}

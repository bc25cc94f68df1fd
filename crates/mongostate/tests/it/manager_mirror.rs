//! The MQTT mirror's rows in the Manager mode (`fetcher_worker_mirror`): written in the
//! transaction of the state change that emits the event, only when the mirror is on, never in
//! lib-streaming's collection; taken, backed off and deleted as the PostgreSQL mirror queue's.

use std::time::Duration;

use mongodb::bson::{doc, Document};
use mongostate::{mirror_queue, ManagerStore};
use outbox::{Recorded, RowId, Sink, TerminalOutcome, TerminalRecord};
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::manager_world::*;

const PREFIX: &str = "lerian/fetcher";

async fn mirror_rows(store: &ManagerStore, job: Uuid) -> Vec<Document> {
    let mut cursor = store
        .store()
        .mirror_rows()
        .find(doc! {"job_id": mongostate::binary_id(job)})
        .await
        .expect("find mirror rows");
    let mut rows = Vec::new();
    while cursor.advance().await.expect("next row") {
        rows.push(cursor.deserialize_current().expect("a row"));
    }
    rows
}

/// The mirror's topic of `id`'s `event` about `resource` (`job`, `jobExecution`).
fn topic(resource: &str, id: Uuid, event: &str) -> String {
    format!("{PREFIX}/events/{resource}/{}/{event}", id.as_hyphenated())
}

/// The row of `rows` on `topic`, if one is.
fn row_on<'a>(rows: &'a [Document], topic: &str) -> Option<&'a Document> {
    rows.iter().find(|r| r.get_str("topic") == Ok(topic))
}

/// The due mirror rows `relay` leases (no grace, up to 10).
async fn due(rows: &mongostate::Store, relay: &str) -> Vec<outbox::PendingEvent> {
    mirror_queue::claim_due(rows, relay, Duration::ZERO, LEASE, 10)
        .await
        .expect("claim")
}

async fn streaming_rows(store: &ManagerStore) -> u64 {
    store
        .store()
        .outbox_rows()
        .count_documents(doc! {})
        .await
        .expect("count")
}

/// `world`'s store with the mirror on, and a new job it claimed for `owner-a`.
async fn mirrored_claimed(world: &World) -> (ManagerStore, Uuid) {
    let store = world.store.clone().mirrored(PREFIX);
    let id = world.job().await;
    world.claim(id, "owner-a", LEASE).await;
    (store, id)
}

/// Records `id`'s completion in `store`: the event sent, and the answer.
async fn record_completed(
    store: &ManagerStore,
    id: Uuid,
) -> (contract::event::OutboundEvent, Recorded) {
    let outcome = completed();
    let sent = event(id, &outcome);
    let recorded = store
        .record_terminal(&record(id, outcome, &sent))
        .await
        .expect("record");
    (sent, recorded)
}

#[tokio::test]
async fn a_completed_job_with_the_mirror_on_gets_one_mirror_row_and_only_its_amqp_row_streams() {
    let world = World::new().await;
    let (store, id) = mirrored_claimed(&world).await;
    store.ensure_indexes().await.expect("indexes");

    let (sent, recorded) = record_completed(&store, id).await;

    assert!(
        matches!(recorded, Recorded::Inserted { .. }),
        "{recorded:?}"
    );
    let rows = mirror_rows(&store, id).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row.get_str("ce_id"), Ok(sent.ce_id()));
    assert_eq!(
        row.get_str("topic"),
        Ok(topic("job", id, "completed").as_str())
    );
    let body = row.get_binary_generic("body").expect("payload bytes");
    let payload: Map<String, Value> = serde_json::from_slice(body).expect("JSON payload");
    assert_eq!(payload.get("description"), Some(&Value::from("tests")));
    // lib-streaming's collection holds the AMQP row alone.
    assert_eq!(streaming_rows(&store).await, 1);
}

#[tokio::test]
async fn with_the_mirror_off_no_mirror_row_is_written() {
    let world = World::new().await;
    let id = world.job().await;
    world.claim(id, "owner-a", LEASE).await;

    let recorded = world.record(id, Some("owner-a"), completed()).await;

    assert!(
        matches!(recorded, Recorded::Inserted { .. }),
        "{recorded:?}"
    );
    assert!(mirror_rows(&world.store, id).await.is_empty());
    assert_eq!(streaming_rows(&world.store).await, 1);
}

#[tokio::test]
async fn an_event_the_mirror_cannot_copy_aborts_the_whole_transaction() {
    let world = World::new().await;
    let store = world.store.clone().mirrored(PREFIX);
    let (on, off) = (world.job().await, world.job().await);
    world.claim(on, "owner-a", LEASE).await;
    world.claim(off, "owner-a", LEASE).await;
    // A body that is JSON but no object: the AMQP row takes it, the mirror's payload cannot.
    let outcome = completed();
    let mut sent_on = event(on, &outcome);
    sent_on.body = b"[1]".to_vec();
    let mut sent_off = event(off, &outcome);
    sent_off.body = b"[1]".to_vec();

    let refused = store
        .record_terminal(&record(on, outcome.clone(), &sent_on))
        .await;
    let without_mirror = world
        .store
        .record_terminal(&record(off, outcome, &sent_off))
        .await
        .expect("recorded without the mirror");

    assert!(refused.is_err(), "{refused:?}");
    assert!(matches!(without_mirror, Recorded::Inserted { .. }));
    // The aborted transaction left nothing: no mirror row, no AMQP row, the job still running.
    assert!(mirror_rows(&store, on).await.is_empty());
    assert_eq!(streaming_rows(&store).await, 1);
    let job = world.manager.get_job(on).await.expect("read");
    assert_eq!(job.status, "processing");
}

#[tokio::test]
async fn mirror_rows_are_leased_backed_off_and_deleted_once_delivered() {
    let world = World::new().await;
    let (store, id) = mirrored_claimed(&world).await;
    store.ensure_indexes().await.expect("indexes");
    record_completed(&store, id).await;
    let rows = store.store();
    let before = mirror_queue::stats(rows).await.expect("stats");
    assert_eq!((before.pending, before.failing), (1, 0), "{before:?}");
    assert!(before.oldest_unpublished_age.is_some());

    let taken = due(rows, "relay-1").await;
    let again = due(rows, "relay-2").await;

    assert_eq!(taken.len(), 1);
    assert!(again.is_empty(), "a leased row is taken twice: {again:?}");
    let event = &taken[0];
    assert_eq!(event.sink, Sink::Mqtt);
    assert_eq!(event.attempts, 1);
    assert_eq!(
        event.topic.as_deref(),
        Some(topic("job", id, "completed").as_str())
    );
    let RowId::Uuid(row) = event.id else {
        panic!("a UUID row id")
    };

    // A failed publish: backed off, its error kept, its attempt counted by the next lease.
    assert!(mirror_queue::mark_failed(
        rows,
        row,
        "relay-1",
        "broker away",
        Duration::from_secs(3600)
    )
    .await
    .expect("mark failed"));
    let backed_off = due(rows, "relay-1").await;
    assert!(
        backed_off.is_empty(),
        "due before its backoff: {backed_off:?}"
    );
    let stored = &mirror_rows(&store, id).await[0];
    assert_eq!(stored.get_str("last_error"), Ok("broker away"));
    let failing = mirror_queue::stats(rows).await.expect("stats");
    assert_eq!((failing.pending, failing.failing), (1, 1), "{failing:?}");
    store
        .store()
        .mirror_rows()
        .update_one(
            doc! {},
            doc! {"$set": {"next_attempt_at": mongodb::bson::DateTime::now()}},
        )
        .await
        .expect("make it due");
    let retried = due(rows, "relay-1").await;
    assert_eq!(retried.len(), 1);
    assert_eq!(retried[0].attempts, 2);

    // Another relay cannot delete a row it does not hold; its holder does.
    assert_eq!(
        mirror_queue::delete_published(rows, &[row], "relay-2")
            .await
            .expect("delete"),
        0
    );
    assert_eq!(
        mirror_queue::delete_published(rows, &[row], "relay-1")
            .await
            .expect("delete"),
        1
    );
    assert!(mirror_rows(&store, id).await.is_empty());
    let after = mirror_queue::stats(rows).await.expect("stats");
    assert_eq!(after.pending, 0);
    assert_eq!(after.oldest_unpublished_age, None);
}

/// `id`'s end by `owner-a`.
fn record(
    id: Uuid,
    outcome: TerminalOutcome,
    event: &contract::event::OutboundEvent,
) -> TerminalRecord<'_> {
    terminal_record(id, Some("owner-a"), outcome, event)
}

#[tokio::test]
async fn a_cancel_mirrors_each_of_its_events_and_streams_none() {
    let world = World::new().await;
    let (store, id) = mirrored_claimed(&world).await;

    let controlled = store
        .control(&control_request(
            id,
            contract::lifecycle::Step::Cancel { force: true },
        ))
        .await
        .expect("the cancel is recorded");

    let outbox::Controlled::Done { events, .. } = controlled else {
        panic!("refused: {controlled:?}")
    };
    assert!(!events.is_empty());
    // One mirror row per event this Worker recorded, with the same ce-id.
    let mut recorded: Vec<String> = events.iter().map(|e| e.event.ce_id().to_owned()).collect();
    let rows = mirror_rows(&store, id).await;
    let mut mirrored: Vec<String> = rows
        .iter()
        .map(|r| r.get_str("ce_id").expect("ce_id").to_owned())
        .collect();
    recorded.sort();
    mirrored.sort();
    assert_eq!(mirrored, recorded);
    // A running job's forced cancel: in progress until its run ends it.
    let job_topic = topic("job", id, "cancellation_in_progress");
    assert!(row_on(&rows, &job_topic).is_some(), "{rows:?}");
    // Nothing of a cancel goes to lib-streaming's collection.
    assert_eq!(streaming_rows(&store).await, 0);
}

#[tokio::test]
async fn a_failed_end_mirrors_its_closed_executions_and_counts_them_in_its_payload() {
    let world = World::new().await;
    let (store, id) = mirrored_claimed(&world).await;
    let outcome = failed("the datasource refused the query");
    let sent = event(id, &outcome);
    let mut end = record(id, outcome, &sent);
    end.close = Some(outbox::Close::CANCELED);

    let recorded = store.record_terminal(&end).await.expect("record");

    let Recorded::Inserted { executions, .. } = recorded else {
        panic!("not recorded: {recorded:?}")
    };
    assert_eq!(executions.len(), 1, "the claim queued one execution");
    let rows = mirror_rows(&store, id).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    let execution = topic("jobExecution", id, "canceled");
    assert!(row_on(&rows, &execution).is_some(), "{rows:?}");
    // A failed job is, to the mirror, a job whose executions all ended: `completed`, with the
    // execution this transaction closed counted.
    let job_row = row_on(&rows, &topic("job", id, "completed"))
        .unwrap_or_else(|| panic!("no job row: {rows:?}"));
    let payload: Value =
        serde_json::from_slice(job_row.get_binary_generic("body").expect("bytes")).expect("JSON");
    assert_eq!(
        payload["jobProcessDetails"]["numberOfCanceledThings"], 1,
        "{payload}"
    );
}

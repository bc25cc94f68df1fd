//! A claimed job's end in one statement against the real PostgreSQL: on the normal path it
//! writes exactly what the locked-row transaction writes for the same input; off it (a cancel
//! in progress, a claim not held, the mirror on, an end recorded already) it writes nothing and
//! the locked-row transaction answers as before.

use chrono::{DateTime, Duration as Span, Utc};
use contract::event::OutboundEvent;
use contract::lifecycle::{ExecutionStatus, Step};
use outbox::{
    Close, ControlRequest, Controlled, ExecutionReport, Recorded, Store, TerminalOutcome,
    TerminalRecord,
};
use serde_json::Value;
use uuid::Uuid;

use crate::support::{
    claimed_of, completed, control_request, failed, mapped, metadata, TestDb, LONG,
};

const DATASOURCES: [&str; 2] = ["beta", "alpha"];

/// Claims a new job of [`DATASOURCES`] (a table `t` each) for `owner`.
async fn claimed_with(store: &Store, owner: &str) -> Uuid {
    claimed_of(store, owner, &mapped(&DATASOURCES, &["t"])).await
}

/// A run's last reports: every datasource ended (one succeeded, one rejected after a retry),
/// with times finer than a microsecond, as a run's clock gives them.
fn reports(at: DateTime<Utc>) -> Vec<ExecutionReport> {
    let started = at + Span::nanoseconds(123_456_789);
    vec![
        ExecutionReport {
            datasource: "beta".to_owned(),
            status: ExecutionStatus::Rejected,
            row_count: 0,
            started_at: Some(started),
            ended_at: Some(started + Span::nanoseconds(1_001)),
            error: Some("table t not found".to_owned()),
            attempts: 2,
            last_error: Some("connection reset".to_owned()),
        },
        ExecutionReport {
            datasource: "alpha".to_owned(),
            status: ExecutionStatus::Succeeded,
            row_count: 3,
            started_at: Some(started),
            ended_at: Some(started + Span::milliseconds(5)),
            error: None,
            attempts: 1,
            last_error: None,
        },
    ]
}

/// `job_id`'s end by its holder `worker-a` with `outcome` and the run's last `executions`,
/// what they leave open closed as canceled.
fn end<'a>(
    job_id: Uuid,
    (outcome, event): &'a (TerminalOutcome, OutboundEvent),
    executions: &'a [ExecutionReport],
) -> TerminalRecord<'a> {
    TerminalRecord {
        job_id,
        owner: Some("worker-a"),
        tenant: None,
        outcome: outcome.clone(),
        event,
        publisher: "worker-a",
        lease: LONG,
        leaves_object: true,
        metadata: job_metadata(),
        executions,
        close: Some(Close::CANCELED),
    }
}

/// The jobs' [`metadata`], for as long as a record borrows it.
fn job_metadata() -> &'static serde_json::Map<String, Value> {
    static METADATA: std::sync::OnceLock<serde_json::Map<String, Value>> =
        std::sync::OnceLock::new();
    METADATA.get_or_init(metadata)
}

/// Everything the end wrote about the job, with its id replaced by `JOB` and what differs by
/// nature between two records (event ids and times, row ids, clocks) left out: the job's row,
/// its executions, and its outbox rows in commit order.
async fn written(store: &Store, job_id: Uuid) -> Value {
    let job = store.job(job_id).await.expect("job").expect("a job row");
    let executions: Vec<Value> = store
        .executions(job_id)
        .await
        .expect("executions")
        .into_iter()
        .map(|e| {
            serde_json::json!([
                e.datasource,
                e.status,
                e.row_count,
                e.tables,
                time(e.started_at),
                time(e.ended_at),
                e.error,
                e.attempts,
                e.last_error
            ])
        })
        .collect();
    type OutboxRow = (
        String,
        Vec<u8>,
        Value,
        Option<String>,
        i32,
        Option<String>,
        bool,
        String,
        bool,
    );
    let rows: Vec<OutboxRow> = sqlx::query_as(
        "SELECT ce_id, body, attributes, request_id, attempts, leased_by,
                COALESCE(lease_until > now() + interval '59 minutes', false), sink,
                published_at IS NULL
         FROM outbox WHERE job_id = $1 ORDER BY id",
    )
    .bind(job_id)
    .fetch_all(store.pool())
    .await
    .expect("outbox rows");
    let outbox: Vec<Value> = rows
        .into_iter()
        .map(
            |(ce_id, body, attributes, request_id, attempts, leased_by, leased, sink, open)| {
                let body: Value = serde_json::from_slice(&body).expect("JSON body");
                let mut attributes = attributes;
                let attributes = attributes.as_object_mut().expect("attributes object");
                attributes.remove("id");
                attributes.remove("time");
                serde_json::json!([
                    ce_id, body, attributes, request_id, attempts, leased_by, leased, sink, open
                ])
            },
        )
        .collect();
    let all = serde_json::json!({
        "job": [
            job.status, job.result_path, job.result_hmac, job.result_size_bytes,
            job.result_row_count, job.error_message, job.owner, time(job.lease_expires_at),
            job.finished_at.is_some(), job.attempts, job.cancel_requested
        ],
        "executions": executions,
        "outbox": outbox,
    });
    let text = all.to_string().replace(&job_id.to_string(), "JOB");
    serde_json::from_str(&text).expect("JSON")
}

/// Asserts the one statement declines `record` (it answers `None`) and writes nothing: the job
/// is still as [`written`] gave it `before`.
async fn assert_declined(store: &Store, record: &TerminalRecord<'_>, before: &Value) {
    assert_eq!(
        store.record_terminal_claimed(record).await.expect("one"),
        None
    );
    assert_eq!(
        &written(store, record.job_id).await,
        before,
        "nothing written"
    );
}

/// `time` to the nanosecond, as text.
fn time(time: Option<DateTime<Utc>>) -> Option<String> {
    time.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
}

/// The pending events of an answer, as (ce-id pattern, body) with the job's id replaced.
fn answered(recorded: &Recorded, job_id: Uuid) -> Vec<String> {
    let Recorded::Inserted { executions, .. } = recorded else {
        panic!("not inserted: {recorded:?}");
    };
    executions
        .iter()
        .map(|e| {
            format!(
                "{} {} {}",
                e.event.attributes.subject,
                e.attempts,
                String::from_utf8_lossy(&e.event.body)
            )
            .replace(&job_id.to_string(), "JOB")
        })
        .collect()
}

#[tokio::test]
async fn the_one_statement_writes_what_the_locked_transaction_writes() {
    let db = TestDb::migrated().await;
    let store = &db.store;
    let at = Utc::now();
    let reports = reports(at);
    for (name, outcome) in [
        (
            "completed",
            completed as fn(Uuid) -> (TerminalOutcome, OutboundEvent),
        ),
        ("failed", |job_id| failed(job_id, "the source went away")),
    ] {
        let fast = claimed_with(store, "worker-a").await;
        let locked = claimed_with(store, "worker-a").await;
        let fast_outcome = outcome(fast);
        let locked_outcome = outcome(locked);
        // The two events differ by their job only (not by the clock of their making).
        let locked_outcome = {
            let body = String::from_utf8(fast_outcome.1.body.clone())
                .expect("UTF-8")
                .replace(&fast.to_string(), &locked.to_string());
            let mut event = locked_outcome.1;
            event.body = body.into_bytes();
            (locked_outcome.0, event)
        };

        let one = store
            .record_terminal_claimed(&end(fast, &fast_outcome, &reports))
            .await
            .expect("one statement")
            .expect("the normal path");
        let tx = store
            .record_terminal_locked(&end(locked, &locked_outcome, &reports))
            .await
            .expect("locked transaction");

        assert_eq!(
            written(store, fast).await,
            written(store, locked).await,
            "{name}"
        );
        assert_eq!(answered(&one, fast), answered(&tx, locked), "{name}");
        let Recorded::Inserted {
            outbox_id,
            executions,
        } = &one
        else {
            unreachable!("checked by answered");
        };
        // The answer names the rows written: the executions' first, then the job's.
        let ids: Vec<i64> =
            sqlx::query_scalar("SELECT id FROM outbox WHERE job_id = $1 ORDER BY id")
                .bind(fast)
                .fetch_all(store.pool())
                .await
                .expect("ids");
        let mut answered_ids: Vec<_> = executions.iter().map(|e| e.id).collect();
        answered_ids.push(*outbox_id);
        assert_eq!(
            answered_ids,
            ids.into_iter()
                .map(outbox::RowId::Serial)
                .collect::<Vec<_>>(),
            "{name}"
        );
        // Each answered event is its row's exactly (what the publisher sends).
        for pending in executions {
            let body: Vec<u8> = sqlx::query_scalar("SELECT body FROM outbox WHERE ce_id = $1")
                .bind(pending.event.ce_id())
                .fetch_one(store.pool())
                .await
                .expect("body");
            assert_eq!(body, pending.event.body, "{name}");
        }
    }
    db.drop().await;
}

/// Claims a job and has its cancel asked: `cancellation_in_progress`.
async fn canceling(store: &Store) -> Uuid {
    let job_id = claimed_with(store, "worker-a").await;
    let controlled = store
        .control(&ControlRequest {
            request_id: Some("req-2"),
            ..control_request(job_id, Step::Cancel { force: false })
        })
        .await
        .expect("cancel");
    assert!(
        matches!(controlled, Controlled::Done { .. }),
        "{controlled:?}"
    );
    job_id
}

#[tokio::test]
async fn a_job_being_canceled_falls_back_and_its_cancel_wins_as_before() {
    let db = TestDb::migrated().await;
    let store = &db.store;
    let reports = reports(Utc::now());
    let fast = canceling(store).await;
    let locked = canceling(store).await;
    let before = written(store, fast).await;

    let fast_outcome = completed(fast);
    let record = end(fast, &fast_outcome, &reports);
    assert_declined(store, &record, &before).await;

    let recorded = store.record_terminal(&record).await.expect("record");
    let locked_outcome = completed(locked);
    let tx = store
        .record_terminal_locked(&end(locked, &locked_outcome, &reports))
        .await
        .expect("locked");
    let (
        Recorded::Canceled {
            transition: a,
            events: fast_events,
            ..
        },
        Recorded::Canceled {
            transition: b,
            events: locked_events,
            ..
        },
    ) = (&recorded, &tx)
    else {
        panic!("the cancel wins: {recorded:?} / {tx:?}");
    };
    assert_eq!(a, b);
    assert_eq!(fast_events.len(), locked_events.len());
    assert_eq!(
        store.job(fast).await.expect("job").expect("row").status,
        "canceled"
    );
    db.drop().await;
}

#[tokio::test]
async fn a_claim_not_held_writes_nothing_and_answers_lost() {
    let db = TestDb::migrated().await;
    let store = &db.store;
    let reports = reports(Utc::now());
    let job_id = claimed_with(store, "worker-a").await;
    let before = written(store, job_id).await;
    let outcome = completed(job_id);

    // Another worker's record (a claim taken over: its owner is no longer the caller).
    let record = TerminalRecord {
        owner: Some("worker-b"),
        ..end(job_id, &outcome, &reports)
    };
    assert_declined(store, &record, &before).await;
    assert_eq!(
        store.record_terminal(&record).await.expect("record"),
        Recorded::LostClaim
    );
    assert_eq!(written(store, job_id).await, before, "still nothing");

    // The holder's end, once: the same end again finds the job ended.
    let record = end(job_id, &outcome, &reports);
    assert!(matches!(
        store.record_terminal(&record).await.expect("record"),
        Recorded::Inserted { .. }
    ));
    let ended = written(store, job_id).await;
    assert_eq!(
        store.record_terminal_claimed(&record).await.expect("again"),
        None
    );
    assert_eq!(
        store.record_terminal(&record).await.expect("again"),
        Recorded::AlreadyTerminal {
            status: contract::lifecycle::JobStatus::Completed
        }
    );
    assert_eq!(written(store, job_id).await, ended, "nothing more");
    db.drop().await;
}

#[tokio::test]
async fn an_event_recorded_already_falls_back_to_its_answer() {
    let db = TestDb::migrated().await;
    let store = &db.store;
    let job_id = claimed_with(store, "worker-a").await;
    let outcome = completed(job_id);
    // The job's event is in the outbox already (a store edited by hand).
    sqlx::query("INSERT INTO outbox (ce_id, job_id, body, attributes) VALUES ($1, $2, '{}', '{}')")
        .bind(outcome.1.ce_id())
        .bind(job_id)
        .execute(store.pool())
        .await
        .expect("a row");
    let before = written(store, job_id).await;
    let record = end(job_id, &outcome, &[]);
    assert_declined(store, &record, &before).await;
    assert_eq!(
        store.record_terminal(&record).await.expect("record"),
        Recorded::DuplicateEvent {
            ce_id: outcome.1.ce_id().to_owned()
        }
    );
    db.drop().await;
}

#[tokio::test]
async fn off_the_normal_path_the_locked_transaction_answers() {
    let db = TestDb::migrated().await;
    let reports = reports(Utc::now());
    // The MQTT mirror on: its rows need the job's facts as the transaction leaves them.
    let mirrored = Store::new(db.pool().clone()).mirrored("fetcher");
    let job_id = claimed_with(&mirrored, "worker-a").await;
    let outcome = completed(job_id);
    let record = end(job_id, &outcome, &reports);
    assert_eq!(
        mirrored
            .record_terminal_claimed(&record)
            .await
            .expect("one"),
        None
    );
    assert!(matches!(
        mirrored.record_terminal(&record).await.expect("record"),
        Recorded::Inserted { .. }
    ));

    // Executions left open to close: the locked transaction closes them.
    let store = &db.store;
    let job_id = claimed_with(store, "worker-a").await;
    let outcome = failed(job_id, "stopped");
    let open = [ExecutionReport {
        status: ExecutionStatus::InProgress,
        ended_at: None,
        ..reports[1].clone()
    }];
    let record = end(job_id, &outcome, &open);
    assert_eq!(
        store.record_terminal_claimed(&record).await.expect("one"),
        None
    );
    assert_eq!(
        store.job(job_id).await.expect("job").expect("row").status,
        "processing"
    );
    assert!(matches!(
        store.record_terminal(&record).await.expect("record"),
        Recorded::Inserted { .. }
    ));
    let statuses: Vec<String> = store
        .executions(job_id)
        .await
        .expect("executions")
        .into_iter()
        .map(|e| e.status)
        .collect();
    assert_eq!(statuses, ["CANCELED", "CANCELED"]);
    db.drop().await;
}

//! Objects left by jobs that did not keep them (issue 34): marked with the job's end, listed for
//! the sweeper once past the grace, cleared when the object is gone.

use std::time::Duration;

use contract::lifecycle::{Step, Then};
use outbox::{ControlRequest, Controlled, Recorded, TerminalRecord};
use uuid::Uuid;

use crate::support::{claimed, completed, control_request, failed, record, TestDb, LONG, SOURCE};

async fn left(db: &TestDb) -> Vec<Uuid> {
    db.store
        .objects_left(Duration::ZERO, 10)
        .await
        .expect("objects left")
        .into_iter()
        .map(|(job_id, _)| job_id)
        .collect()
}

#[tokio::test]
async fn a_failed_end_that_leaves_an_object_is_listed_until_discarded() {
    let db = TestDb::migrated().await;
    let kept = claimed(&db.store, "worker-a").await;
    let (outcome, event) = failed(kept, "boom");
    let recorded = db
        .store
        .record_terminal(&TerminalRecord {
            job_id: kept,
            owner: Some("worker-a"),
            tenant: None,
            outcome,
            event: &event,
            metadata: &Default::default(),
            leaves_object: true,
            publisher: "worker-a",
            lease: LONG,
            executions: &[],
            close: None,
        })
        .await
        .expect("record");
    assert!(
        matches!(recorded, Recorded::Inserted { .. }),
        "{recorded:?}"
    );
    // A failure that leaves none, and a completion, are not listed.
    let plain = claimed(&db.store, "worker-a").await;
    record(
        &db.store,
        plain,
        Some("worker-a"),
        failed(plain, "x"),
        "worker-a",
        LONG,
    )
    .await;
    let done = claimed(&db.store, "worker-a").await;
    record(
        &db.store,
        done,
        Some("worker-a"),
        completed(done),
        "worker-a",
        LONG,
    )
    .await;

    assert_eq!(left(&db).await, [kept]);
    assert!(
        db.store
            .objects_left(Duration::from_secs(3600), 10)
            .await
            .expect("objects left")
            .is_empty(),
        "within the grace, the Worker that ended it deletes it"
    );
    db.store.object_discarded(kept).await.expect("discarded");
    assert!(left(&db).await.is_empty());
    // A run that stored its object after the job ended failed marks it again.
    db.store.mark_object_left(plain).await.expect("mark");
    db.store.mark_object_left(done).await.expect("mark");
    assert_eq!(left(&db).await, [plain], "never a completed job's object");
    db.drop().await;
}

#[tokio::test]
async fn a_cancel_that_discards_the_object_marks_it_and_a_deletion_clears_it() {
    let db = TestDb::migrated().await;
    let job_id = claimed(&db.store, "worker-a").await;
    let cancel = control_request(job_id, Step::Cancel { force: false });
    db.store.control(&cancel).await.expect("cancel");
    // The run's commit loses the race: the cancel ends, its object is to be discarded.
    let recorded = record(
        &db.store,
        job_id,
        Some("worker-a"),
        completed(job_id),
        "worker-a",
        LONG,
    )
    .await;
    let Recorded::Canceled { transition, .. } = recorded else {
        panic!("{recorded:?}");
    };
    assert_eq!(transition.then, Then::DiscardObject);
    assert_eq!(left(&db).await, [job_id]);

    let delete = ControlRequest {
        step: Step::Delete { force: false },
        ..cancel
    };
    let deleting = db.store.control(&delete).await.expect("delete");
    assert!(matches!(deleting, Controlled::Done { .. }), "{deleting:?}");
    let deleted = db
        .store
        .object_deleted(job_id, true, SOURCE, "api", LONG)
        .await
        .expect("deleted");
    assert!(matches!(deleted, Controlled::Done { .. }), "{deleted:?}");
    assert!(left(&db).await.is_empty(), "the deletion removed it");
    db.drop().await;
}

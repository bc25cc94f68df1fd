//! The Manager mode's outbox as a test reads it.

use mongodb::bson::{doc, Document};
use mongodb::Database;
use uuid::Uuid;

/// Whether the job document `stored` names a terminal event whose row in the Manager's outbox
/// (`db`) is marked `PUBLISHED`. The marks trail the confirms: the publish is the core's last
/// step.
pub async fn terminal_event_published(db: &Database, stored: &Document) -> bool {
    let row = stored
        .get_document("fetcher_worker")
        .and_then(|w| w.get_document("terminal_event"))
        .and_then(|e| e.get_str("outbox_id"))
        .unwrap_or_else(|_| panic!("no terminal event row: {stored}"));
    db.collection::<Document>(mongostate::OUTBOX_COLLECTION)
        .count_documents(doc! {"id": row, "status": "PUBLISHED"})
        .await
        .expect("the Manager's outbox")
        == 1
}

/// Waits (30 s at most) until job `job_id`'s terminal event is marked published.
pub async fn wait_terminal_event_published(
    db: &Database,
    manager: &testkit::manager::Manager,
    job_id: Uuid,
) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let stored = manager.stored(job_id).await.expect("the job");
        if terminal_event_published(db, &stored).await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "job {job_id}'s terminal event is still unmarked: {stored}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

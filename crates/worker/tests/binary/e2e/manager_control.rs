//! The control API in the Manager mode (`API_ENABLED=true` beside `STATE_BACKEND` mongodb): a
//! cancel of a job whose message has not come yet, a forced cancel of a running job, a delete of
//! a completed one; each ends with the lifecycle's events on the exchange and the job document
//! as the Manager's `GET` must read it (a canceled job `failed`, a deleted one without its
//! result fields).

use std::time::{Duration, Instant};

use mongodb::bson::Bson;
use uuid::Uuid;

use super::manager::ManagerWorld;
use crate::harness::Signing;

/// The routing keys of the next `n` events of `job_id`.
async fn routing_keys(
    events: &mut crate::harness::Listener,
    job_id: Uuid,
    n: usize,
) -> Vec<String> {
    let mut keys = Vec::new();
    for _ in 0..n {
        let event = events.event_for(job_id, Duration::from_secs(30)).await;
        keys.push(event.delivery.routing_key.to_string());
    }
    keys
}

/// What the Manager shows of a canceled job: `failed`, inactive, ended, saying canceled.
async fn manager_sees_canceled(m: &ManagerWorld, job_id: Uuid) {
    let got = m.manager.get_job(job_id).await.expect("the Manager's GET");
    assert_eq!(got.status, "failed");
    assert_eq!(got.stored.get("dedup_active"), Some(&Bson::Boolean(false)));
    assert!(got.completed_at.is_some());
    assert_eq!(got.result_path, None);
    let metadata = got.metadata.expect("metadata");
    let error = metadata
        .get_str("error")
        .expect("metadata.error is a string");
    assert!(
        error.contains("canceled through the control API"),
        "{error}"
    );
    for key in testkit::manager::MARKER_KEYS {
        assert!(!got
            .stored
            .get_document("metadata")
            .unwrap()
            .contains_key(key));
    }
}

#[tokio::test]
async fn a_cancel_of_a_job_whose_message_has_not_come_ends_it_and_its_message_is_acked_unrun() {
    let m = ManagerWorld::new().await;
    let (mut worker, api) = m.start_worker_with_api().await;
    let mut events = m.world.listen().await;
    let (job_id, _) = m.create("payments", &["id"]).await;

    let (status, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(status, 200, "{document}");
    assert_eq!(document["status"], "pending");
    assert_eq!(document["mappedFields"]["src"]["payments"][0], "id");
    assert_eq!(document["metadata"]["source"], "e2e");
    let (status, document) = api.send(
        "POST",
        job_id,
        "/cancel",
        None,
        br#"{"comment":"not needed","reasonCode":"OPS_2"}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202, "{document}");
    assert_eq!(document["status"], "canceled");
    assert_eq!(document["reasonCode"], "OPS_2");
    assert_eq!(
        routing_keys(&mut events, job_id, 2).await,
        ["job.cancellation_in_progress", "job.canceled"]
    );
    manager_sees_canceled(&m, job_id).await;

    // Its message comes: acknowledged without a run, nothing stored, no other event.
    m.world.submit_job(job_id, "src", "payments", &["id"]).await;
    worker
        .wait_for_lines(
            "the message acknowledged unrun",
            1,
            Duration::from_secs(30),
            |line| line.contains(&job_id.to_string()) && line.contains("Job already finished"),
        )
        .await;
    assert!(m.world.object_keys().await.is_empty(), "nothing stored");
    assert!(events.drain(Duration::from_secs(2)).await.is_empty());
    let (status, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(
        (status, document["status"].as_str()),
        (200, Some("canceled"))
    );
    // Finding jobs is not offered in the Manager mode.
    let (status, answer) = api.list("", "", None);
    assert_eq!(status, 501, "{answer}");

    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(30)).await, Some(0));
    m.cleanup().await;
}

#[tokio::test]
async fn a_forced_cancel_of_a_running_job_stops_it_and_the_manager_reads_it_failed() {
    let m = ManagerWorld::new().await;
    let (mut worker, api) = m.start_worker_with_api().await;
    let mut events = m.world.listen().await;
    let (job_id, _) = m.submit("slow", &["id"]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while m.world.slow_queries().await == 0 {
        assert!(Instant::now() < deadline, "the query never ran");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        m.manager.get_job(job_id).await.unwrap().status,
        "processing"
    );

    let (status, document) = api.send(
        "POST",
        job_id,
        "/cancel",
        None,
        br#"{"force":true,"comment":"runaway","reasonCode":"OPS_1"}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202, "{document}");
    let asked = Instant::now();
    assert_eq!(
        routing_keys(&mut events, job_id, 2).await,
        ["job.cancellation_in_progress", "job.canceled"]
    );
    // The statement was stopped on the source server, well before its 6 s.
    while m.world.slow_queries().await > 0 {
        assert!(
            asked.elapsed() < Duration::from_secs(4),
            "the query still runs on the source server"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    manager_sees_canceled(&m, job_id).await;
    let (status, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
    assert_eq!(status, 200);
    assert_eq!(document["status"], "canceled", "{document}");
    assert_eq!(document["forceCanceled"], true);
    assert_eq!(
        document["executions"][0]["status"], "CANCELED",
        "{document}"
    );
    assert!(m.world.object_keys().await.is_empty(), "nothing stored");
    // One terminal event: no job.completed or job.failed follows.
    assert!(events.drain(Duration::from_secs(3)).await.is_empty());

    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(30)).await, Some(0));
    m.cleanup().await;
}

#[tokio::test]
async fn a_deleted_job_loses_its_object_and_the_managers_result_fields() {
    let m = ManagerWorld::new().await;
    let (mut worker, api) = m.start_worker_with_api().await;
    let mut events = m.world.listen().await;
    let (job_id, _) = m.submit("payments", &["id"]).await;
    assert_eq!(
        routing_keys(&mut events, job_id, 1).await,
        ["job.completed"]
    );
    assert_eq!(m.world.object_keys().await.len(), 1);
    let before = m.manager.get_job(job_id).await.unwrap();
    assert!(before.result_path.is_some());

    let (status, document) = api.send(
        "DELETE",
        job_id,
        "",
        None,
        br#"{"comment":"retention"}"#,
        Signing::Valid,
    );
    assert_eq!(status, 202, "{document}");
    assert_eq!(document["status"], "deleted", "{document}");
    let deleting = events.event_for(job_id, Duration::from_secs(30)).await;
    assert_eq!(
        deleting.delivery.routing_key.as_str(),
        "job.deletion_in_progress"
    );
    let deleted = events.event_for(job_id, Duration::from_secs(30)).await;
    assert_eq!(deleted.delivery.routing_key.as_str(), "job.deleted");
    deleted.verify(&m.world.keys).expect("signature");
    assert_eq!(deleted.body()["resultDeleted"], true);
    assert!(m.world.object_keys().await.is_empty(), "the object is gone");
    let got = m.manager.get_job(job_id).await.expect("the Manager's GET");
    assert_eq!(got.status, "completed", "the Manager has no delete");
    assert_eq!((got.result_path, got.result_hmac), (None, None));
    // Deleted again: accepted, nothing emitted.
    let (status, _) = api.send("DELETE", job_id, "", None, b"", Signing::Valid);
    assert_eq!(status, 202);
    assert!(events.drain(Duration::from_secs(2)).await.is_empty());

    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(30)).await, Some(0));
    m.cleanup().await;
}

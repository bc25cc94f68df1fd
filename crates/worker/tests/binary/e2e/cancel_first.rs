//! A cancel that came before its job's message wins over a message that could not have run
//! anyway (lifecycle §3): the job ends `canceled` with `job.cancellation_in_progress` and
//! `job.canceled`, never `failed`, whatever made the message fail unrun.

use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use crate::harness::{Signing, World};

/// What makes a signed job message fail its job without running it.
const CAUSES: [&str; 3] = [
    "metadata too large",
    "over the engine's limits",
    "an unusable body",
];

/// A message of `job_id` that fails unrun for `cause`, and the headers it needs.
fn unrunnable(world: &World, job_id: Uuid, cause: &str) -> (Vec<u8>, Vec<(&'static str, String)>) {
    let job = |mapped: serde_json::Value, metadata: serde_json::Value| {
        json!({"jobId": job_id, "mappedFields": mapped, "metadata": metadata})
            .to_string()
            .into_bytes()
    };
    match cause {
        // 200 KiB of metadata: under the message limit, over EVENT_MAX_METADATA_BYTES (64 KiB).
        "metadata too large" => (
            job(
                json!({"src": {"payments": ["id"]}}),
                json!({"pad": "x".repeat(200 << 10)}),
            ),
            Vec::new(),
        ),
        // Eleven datasources: over the engine's limit of ten.
        "over the engine's limits" => {
            let mapped: serde_json::Map<_, _> = (0..11)
                .map(|i| (format!("ds{i}"), json!({"payments": ["id"]})))
                .collect();
            let metadata = json!({"source": "e2e", "correlationId": world.id});
            (job(mapped.into(), metadata), Vec::new())
        }
        // Unparseable; its job id is in the header.
        _ => (
            br#"{"jobId": "#.to_vec(),
            vec![("jobId", job_id.to_string())],
        ),
    }
}

#[tokio::test]
async fn a_job_canceled_before_its_message_ends_canceled_when_the_message_cannot_run() {
    let world = World::new().await;
    let (worker, api) = world.start_worker_with_api(Vec::new()).await;
    let mut events = world.listen().await;
    for cause in CAUSES {
        let job_id = Uuid::now_v7();
        let (status, document) = api.send(
            "POST",
            job_id,
            "/cancel",
            None,
            br#"{"comment":"not needed"}"#,
            Signing::Valid,
        );
        assert_eq!(status, 202, "{cause}: {document}");
        assert_eq!(document["status"], "pending", "{cause}: {document}");
        assert_eq!(document["cancelRequested"], true, "{cause}: {document}");

        let (body, headers) = unrunnable(&world, job_id, cause);
        let extra: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        world.submit(&body, None, &extra).await;
        let first = events.event_for(job_id, Duration::from_secs(30)).await;
        assert_eq!(
            first.delivery.routing_key.as_str(),
            "job.cancellation_in_progress",
            "{cause}: {}",
            first.body()
        );
        let second = events.event_for(job_id, Duration::from_secs(30)).await;
        assert_eq!(
            second.delivery.routing_key.as_str(),
            "job.canceled",
            "{cause}: {}",
            second.body()
        );
        for event in [&first, &second] {
            event.verify(&world.keys).expect("signature");
            let body = event.body();
            assert_eq!(body["comment"], "not needed", "{cause}");
            // The message's metadata when it could be read and carried.
            let carried = cause == "over the engine's limits";
            assert_eq!(
                body["metadata"].get("source").is_some(),
                carried,
                "{cause}: {body}"
            );
        }
        let (status, document) = api.send("GET", job_id, "", None, b"", Signing::Valid);
        assert_eq!(status, 200, "{cause}: {document}");
        assert_eq!(document["status"], "canceled", "{cause}: {document}");
        let (attempts, error): (i32, Option<String>) =
            sqlx::query_as("SELECT attempts, error_message FROM jobs WHERE job_id = $1")
                .bind(job_id)
                .fetch_one(&world.state)
                .await
                .expect("job row");
        assert_eq!(
            (attempts, error),
            (0, None),
            "{cause}: never run, no failure"
        );
    }
    // Nothing else (no `job.failed`) for any of them.
    let stray: Vec<String> = events
        .drain(Duration::from_secs(3))
        .await
        .iter()
        .map(|e| format!("{} {}", e.delivery.routing_key, e.text("ce-subject")))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
    assert!(world.object_keys().await.is_empty());
    drop(worker);
    world.cleanup().await;
}

//! The MQTT mirror of the real binary in the Manager mode (issue 35 item 4): a completed job's
//! event reaches its MQTT topic (read by `mosquitto_sub`, a client no one here wrote) from the
//! Worker's own `fetcher_worker_mirror` collection, and the Manager's `streaming_outbox_events`
//! holds only the job's AMQP row, which a Go relay could read.

use std::time::Duration;

use mongodb::bson::{doc, Document};
use serde_json::Value;
use testkit::mqtt::{mqtt_url, unique_prefix, Subscriber};

use crate::harness::Listener;

use super::manager::ManagerWorld;

const WITHIN: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_completed_jobs_event_reaches_its_mqtt_topic_and_only_its_amqp_row_streams() {
    let m = ManagerWorld::new().await;
    let prefix = unique_prefix();
    let subscriber = Subscriber::start(&mqtt_url(), &format!("{prefix}/events/#"));
    let mut worker = m
        .start_worker_with(&[("MQTT_URL", &mqtt_url()), ("MQTT_TOPIC_PREFIX", &prefix)])
        .await;
    let mut events: Listener = m.world.listen().await;

    let (job_id, _) = m.submit("payments", &["memo", "id", "amount"]).await;
    m.world.completed_result(&mut events, job_id).await;

    let topic = format!("{prefix}/events/job/{job_id}/completed");
    let received = subscriber
        .wait_for(WITHIN, |r| r.iter().any(|m| m.topic == topic))
        .await;
    let message = received
        .iter()
        .find(|m| m.topic == topic)
        .unwrap_or_else(|| panic!("nothing on {topic}: {received:?}"));
    let payload: Value = serde_json::from_str(&message.payload).expect("a JSON payload");
    assert_eq!(payload["eventType"], "JOB");
    assert_eq!(payload["jobId"], job_id.to_string());
    assert_eq!(payload["description"], "e2e");
    assert_eq!(
        payload["targets"],
        serde_json::json!(["fetcher:single-tenant:datasource/src"])
    );
    // Delivered: the mirror's row is deleted (after the broker's ack, so waited for).
    let mirror = m
        .mongo
        .client
        .database(&m.mongo.name.to_lowercase())
        .collection::<Document>("fetcher_worker_mirror");
    let deadline = tokio::time::Instant::now() + WITHIN;
    while mirror.count_documents(doc! {}).await.expect("count") > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the mirror's row is never deleted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // lib-streaming's collection: the job's AMQP row alone, nothing of the mirror's.
    let streaming: Vec<Document> = {
        let mut cursor = m
            .mongo
            .db()
            .collection::<Document>("streaming_outbox_events")
            .find(doc! {})
            .await
            .expect("find");
        let mut rows = Vec::new();
        while cursor.advance().await.expect("next") {
            rows.push(cursor.deserialize_current().expect("row"));
        }
        rows
    };
    assert_eq!(streaming.len(), 1, "{streaming:?}");
    let envelope = streaming[0].get_str("payload").expect("envelope");
    assert!(
        envelope.contains("\"transport\":\"rabbitmq\""),
        "{envelope}"
    );

    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(30)).await, Some(0));
    m.cleanup().await;
}

//! The soak's MQTT mirror (issue 14): every replica mirrors to the local Mosquitto under the
//! soak's own prefix, a `mosquitto_sub` records what arrives, and the accounting checks that
//! every terminal job has its job-level MQTT events and that none contradicts its state row.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::Value;
use testkit::mqtt::{mqtt_url, Subscriber};
use uuid::Uuid;

use super::{JobEnd, Summary};
use crate::harness::World;

/// The soak's topic prefix.
pub fn prefix(world: &World) -> String {
    format!("fetcher-chaos/{}", world.id)
}

/// The replicas' mirror variables.
pub fn env(world: &World) -> [(&'static str, String); 2] {
    [
        ("MQTT_URL", mqtt_url()),
        ("MQTT_TOPIC_PREFIX", prefix(world)),
    ]
}

/// Subscribes before any replica starts.
pub fn subscribe(world: &World) -> Subscriber {
    Subscriber::start(&mqtt_url(), &format!("{}/events/#", prefix(world)))
}

fn event_id(ce_id: &str) -> String {
    Uuid::new_v5(&Uuid::NAMESPACE_URL, ce_id.as_bytes()).to_string()
}

/// Waits (up to 2 minutes) until no MQTT row of the soak is unpublished, then checks the
/// mirror against the state rows.
pub async fn account(
    s: &mut Summary,
    world: &World,
    subscriber: &Subscriber,
    states: &HashMap<Uuid, JobEnd>,
) {
    let deadline = Instant::now() + Duration::from_secs(120);
    let unpublished = loop {
        let left: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM outbox WHERE sink = 'mqtt' AND published_at IS NULL",
        )
        .fetch_one(&world.state)
        .await
        .expect("outbox");
        if left == 0 || Instant::now() > deadline {
            break left;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    // What was published has had time to arrive: the subscriber is on the same broker.
    tokio::time::sleep(Duration::from_secs(2)).await;
    s.must("MQTT rows never published", unpublished as usize, 0);

    // Each job's job-level eventIds as received, and every eventId received.
    let mut received: HashMap<Uuid, HashSet<String>> = HashMap::new();
    let mut all = HashSet::new();
    let mut deliveries = 0;
    let mut unreadable = 0;
    for message in subscriber.received() {
        deliveries += 1;
        let Ok(payload) = serde_json::from_str::<Value>(&message.payload) else {
            unreadable += 1;
            continue;
        };
        let (Some(id), Some(job)) = (
            payload["eventId"].as_str(),
            payload["jobId"]
                .as_str()
                .and_then(|j| j.parse::<Uuid>().ok()),
        ) else {
            unreadable += 1;
            continue;
        };
        all.insert(id.to_owned());
        if payload["eventType"] == "JOB" {
            received.entry(job).or_default().insert(id.to_owned());
        }
    }
    s.must("MQTT messages that are not mirror events", unreadable, 0);
    let mut missing = 0;
    let mut contradicting = 0;
    for (id, end) in states.iter().filter(|(_, end)| end.is_end()) {
        let implied: HashSet<String> = end.events(*id).iter().map(|c| event_id(c)).collect();
        let got = received.get(id).cloned().unwrap_or_default();
        if !implied.is_subset(&got) {
            missing += 1;
            if missing <= 5 {
                eprintln!("[chaos] job {id} ({}): MQTT events missing", end.status);
            }
        }
        if !got.is_subset(&implied) {
            contradicting += 1;
            if contradicting <= 5 {
                eprintln!(
                    "[chaos] job {id} ({}): an MQTT event its state row denies",
                    end.status
                );
            }
        }
    }
    s.must("terminal jobs missing a job-level MQTT event", missing, 0);
    s.must(
        "terminal jobs with an MQTT event their state row contradicts",
        contradicting,
        0,
    );
    s.row(
        "MQTT mirror",
        format!("{} distinct events in {deliveries} deliveries", all.len()),
    );
}

//! `fetcherctl watch --mqtt`: the mirror's events from the real Mosquitto, deduplicated by
//! `eventId`, filtered by job, anything that is not a mirror event reported and skipped.

mod support;

use std::process::Command;

use support::watcher::Watcher;
use testkit::mqtt::{mqtt_url, unique_prefix};
use uuid::Uuid;

fn publish(topic: &str, payload: &str) {
    let url = mqtt_url();
    let (host, port) = url
        .trim_start_matches("mqtt://")
        .rsplit_once(':')
        .expect("host:port");
    let status = Command::new("mosquitto_pub")
        .args([
            "-h", host, "-p", port, "-q", "1", "-t", topic, "-m", payload,
        ])
        .status()
        .expect("mosquitto_pub (scripts/services.sh mosquitto)");
    assert!(status.success());
}

#[test]
fn the_mirror_is_watched_deduplicated_by_event_id_and_filtered_by_job() {
    let prefix = unique_prefix();
    let job = Uuid::new_v4();
    let other = Uuid::new_v4();
    let mut watcher = Watcher::start(
        &[
            "--mqtt",
            &mqtt_url(),
            "--mqtt-prefix",
            &prefix,
            "--job",
            &job.to_string(),
            "--count",
            "2",
            "--timeout",
            "30",
            "--json",
        ],
        &[],
    );
    watcher.wait_for_line("Watching MQTT topics");
    let event = |id: &str, job: Uuid, op: &str| {
        format!(r#"{{"eventType":"JOB","eventId":"{id}","operation":"{op}","jobId":"{job}"}}"#)
    };
    let topic = |job: Uuid, op: &str| format!("{prefix}/events/job/{job}/{op}");
    publish(
        &topic(job, "cancellation_in_progress"),
        &event("e-1", job, "cancellation_in_progress"),
    );
    // A republish of the same event: shown once.
    publish(
        &topic(job, "cancellation_in_progress"),
        &event("e-1", job, "cancellation_in_progress"),
    );
    publish(
        &topic(other, "completed"),
        &event("e-9", other, "completed"),
    );
    publish(&topic(job, "junk"), "not json");
    publish(&topic(job, "canceled"), &event("e-2", job, "canceled"));
    let finished = watcher.finish();
    assert!(finished.success, "{}", finished.stderr);
    let lines: Vec<serde_json::Value> = finished
        .stdout
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect();
    assert_eq!(lines.len(), 2, "{}", finished.stdout);
    assert_eq!(lines[0]["topic"], topic(job, "cancellation_in_progress"));
    assert_eq!(lines[0]["payload"]["eventId"], "e-1");
    assert_eq!(lines[1]["payload"]["eventId"], "e-2");
    assert!(finished.stdout.contains("SKIPPED"), "{}", finished.stdout);
}

#[test]
fn a_ca_file_that_is_not_pem_certificates_is_refused_before_connecting() {
    let not_pem = std::env::temp_dir().join(format!("fetcherctl-ca-{}.pem", Uuid::new_v4()));
    std::fs::write(&not_pem, "not a certificate").expect("write");
    for (ca_file, expected) in [
        (not_pem.to_str().expect("path"), "holds no PEM certificate"),
        ("/nonexistent/ca.pem", "does not read as PEM"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_fetcherctl"))
            // Nothing listens on port 1: an error about the file comes before any connection.
            .args([
                "watch",
                "--mqtt",
                "mqtts://127.0.0.1:1",
                "--mqtt-ca-file",
                ca_file,
            ])
            .env_remove("MQTT_CA_FILE")
            .output()
            .expect("fetcherctl");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(stderr.contains(expected), "{stderr}");
    }
    let _ = std::fs::remove_file(&not_pem);
}

#[test]
fn a_password_over_plain_mqtt_is_refused_before_connecting_unless_allowed() {
    let watch = |allow: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_fetcherctl"));
        // Nothing listens on port 1: the refusal comes before any connection.
        command
            .args(["watch", "--mqtt", "mqtt://127.0.0.1:1", "--timeout", "1"])
            .env("MQTT_USERNAME", "operator")
            .env("MQTT_PASSWORD", "not-a-real-password")
            .env_remove("MQTT_ALLOW_CLEARTEXT_PASSWORD");
        if let Some(allow) = allow {
            command.env("MQTT_ALLOW_CLEARTEXT_PASSWORD", allow);
        }
        command.output().expect("fetcherctl")
    };
    let refused = watch(None);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(stderr.contains("MQTT_ALLOW_CLEARTEXT_PASSWORD"), "{stderr}");
    assert!(!stderr.contains("not-a-real-password"), "{stderr}");
    // Allowed, it goes on to connect (and fails there: nothing listens on port 1).
    let allowed = watch(Some("true"));
    let stderr = String::from_utf8_lossy(&allowed.stderr);
    assert!(
        !stderr.contains("MQTT_ALLOW_CLEARTEXT_PASSWORD"),
        "{stderr}"
    );
}

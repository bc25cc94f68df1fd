//! A signed job runs to `job.completed`: headers, signature, stored object, state row.

use std::time::Duration;

use uuid::Uuid;

use crate::harness::World;

#[tokio::test]
async fn a_signed_job_completes_with_a_verifiable_event_and_object() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut events = world.listen().await;

    let job_id = Uuid::now_v7();
    world
        .submit(
            &world.job_body(job_id, "src", "payments", &["memo", "id", "amount"]),
            Some("acme"),
            &[("X-Request-Id", "req-e2e")],
        )
        .await;
    let event = events.event_for(job_id, Duration::from_secs(30)).await;

    // Every header of contract §8.
    assert_eq!(event.delivery.routing_key.as_str(), "job.completed");
    for (name, expected) in [
        ("ce-specversion", "1.0".to_owned()),
        ("ce-id", format!("fetcher.job.completed.{job_id}")),
        ("ce-source", crate::harness::SOURCE.to_owned()),
        ("ce-type", "studio.lerian.job.completed".to_owned()),
        ("ce-subject", job_id.to_string()),
        ("ce-resourcetype", "job".to_owned()),
        ("ce-eventtype", "completed".to_owned()),
        ("ce-schemaversion", "1.0.0".to_owned()),
        ("ce-datacontenttype", "application/json".to_owned()),
        ("ce-tenantid", "acme".to_owned()),
        ("X-Tenant-ID", "acme".to_owned()),
        ("X-Request-Id", "req-e2e".to_owned()),
        ("signature-version", "v1".to_owned()),
    ] {
        assert_eq!(event.text(name), expected, "header {name}");
    }
    assert!(matches!(
        event.header("ce-id"),
        Some(lapin::types::AMQPValue::ByteArray(_))
    ));
    assert!(!event.text("ce-time").is_empty());
    assert_eq!(event.delivery.properties.delivery_mode(), &Some(2));
    event
        .verify(&world.keys)
        .expect("the event's signature verifies with the external key");

    // The stored object opens to a plaintext whose HMAC is the event's.
    let body = event.body();
    assert_eq!(body["status"], "completed");
    assert_eq!(body["metadata"]["source"], "e2e");
    let result = &body["result"];
    let path = result["path"].as_str().expect("path");
    assert_eq!(path, format!("acme/external-data/{job_id}.json"));
    let plaintext = world
        .open_object(path)
        .await
        .expect("the stored object opens");
    assert_eq!(
        world.keys.external_hmac().sign_hex(&plaintext),
        result["hmac"].as_str().expect("hmac")
    );
    assert_eq!(result["integrity"]["signature"], result["hmac"]);
    assert_eq!(result["rowCount"], 3);
    assert_eq!(result["sizeBytes"], plaintext.len());
    let rows: serde_json::Value = serde_json::from_slice(&plaintext).expect("result JSON");
    assert_eq!(
        rows["src"]["payments"][0],
        serde_json::json!({"amount": "10.50", "id": 1, "memo": "first <ok>"})
    );
    assert!(String::from_utf8_lossy(&plaintext).contains("first \\u003cok\\u003e"));

    // The state row agrees.
    let row: (String, Option<String>, Option<String>, Option<String>) = sqlx::query_as(
        "SELECT status, result_path, result_hmac, tenant_id FROM jobs WHERE job_id = $1",
    )
    .bind(job_id)
    .fetch_one(&world.state)
    .await
    .expect("job row");
    assert_eq!(row.0, "completed");
    assert_eq!(row.1.as_deref(), Some(path));
    assert_eq!(row.2.as_deref(), result["hmac"].as_str());
    assert_eq!(row.3.as_deref(), Some("acme"));
    // The mark follows the publish (batched with other jobs' marks): wait for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let published: bool = sqlx::query_scalar(
            "SELECT published_at IS NOT NULL FROM outbox WHERE ce_id = 'fetcher.job.completed.' || $1",
        )
        .bind(job_id.to_string())
        .fetch_one(&world.state)
        .await
        .expect("outbox row");
        if published {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the event was never marked published"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Liveness, and readiness with one check per dependency.
    let (status, health) = worker.get("/health").expect("health");
    assert_eq!(status, 200, "{health}");
    let (status, ready) = worker.get("/readyz").expect("readyz");
    assert_eq!(status, 200, "{ready}");
    let ready: serde_json::Value = serde_json::from_str(&ready).expect("readyz JSON");
    assert_eq!(ready["status"], "healthy");
    for dependency in ["postgres", "rabbitmq", "s3"] {
        assert_eq!(ready["checks"][dependency]["status"], "up", "{ready}");
        assert!(
            ready["checks"][dependency]["latency_ms"].is_number(),
            "{ready}"
        );
    }

    // Metrics are served.
    let (status, metrics) = worker.get("/metrics").expect("metrics");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("fetcher_jobs_total{outcome=\"completed\"} 1"),
        "{metrics}"
    );
    // Upstream's readiness metrics: the checks just run, and the start's probe of each dependency.
    for dependency in ["postgres", "rabbitmq", "s3"] {
        for series in [
            format!("readyz_check_status{{dep=\"{dependency}\",status=\"up\"}}"),
            format!(
                "readyz_check_duration_ms_bucket{{dep=\"{dependency}\",status=\"up\",le=\"5000\"}}"
            ),
            format!("selfprobe_result{{dep=\"{dependency}\"}} 1"),
        ] {
            assert!(metrics.contains(&series), "{series} missing:\n{metrics}");
        }
    }
    drop(worker);
    world.cleanup().await;
}

#[tokio::test]
async fn every_log_line_of_a_job_carries_its_request_id() {
    let world = World::new().await;
    let worker = world.start_worker().await;
    let mut events = world.listen().await;

    // One job that completes and one that fails (its datasource is down): both log lines of
    // their own, from the claim to the publish.
    let jobs = [(Uuid::now_v7(), "src"), (Uuid::now_v7(), "down")];
    for (job_id, connection) in jobs {
        let request_id = format!("req-{job_id}");
        world
            .submit(
                &world.job_body(job_id, connection, "payments", &["id"]),
                None,
                &[("X-Request-Id", &request_id)],
            )
            .await;
    }
    for (job_id, _) in jobs {
        events.event_for(job_id, Duration::from_secs(90)).await;
    }
    let output = worker.output();
    for (job_id, _) in jobs {
        let request_id = format!("\"request_id\":\"req-{job_id}\"");
        let lines: Vec<&str> = output
            .lines()
            .filter(|line| line.contains(&job_id.to_string()))
            .collect();
        assert!(lines.len() >= 2, "too few lines of {job_id}:\n{output}");
        for line in lines {
            assert!(line.contains(&request_id), "no {request_id} in {line}");
        }
    }
    drop(worker);
    world.cleanup().await;
}

//! Secrets never leave the Worker: with a known master key, datasource passwords, an S3 secret,
//! a secret hostname and a password in `DATABASE_URL`, jobs are made to fail in every way that
//! can be provoked, and every log line (JSON and text), event, stored error, outbox row and
//! health or metrics answer is searched for each secret.

use std::time::Duration;

use base64::Engine as _;
use hkdf::Hkdf;
use sha2::Sha256;
use uuid::Uuid;

use crate::harness::{free_port, WorkerProcess, World};
use crate::support::{http_get, publish, signed, work_route};

const SECRET_HOST: &str = "db-secret-host.invalid";
const TABLE_SECRET_HOST: &str = "vault-secret-host.invalid";

struct Secrets {
    /// (what, value) pairs that must appear nowhere.
    values: Vec<(&'static str, String)>,
}

impl Secrets {
    fn of(world: &World) -> Secrets {
        let master = base64::engine::general_purpose::STANDARD
            .decode(&world.master_key)
            .expect("master key");
        let hkdf = Hkdf::<Sha256>::new(None, &master);
        let derived = |label: &str| {
            let mut key = [0u8; 32];
            hkdf.expand(label.as_bytes(), &mut key).expect("hkdf");
            hex::encode(key)
        };
        let id = &world.id;
        let values = vec![
            ("the master key", world.master_key.clone()),
            (
                "the master key without padding",
                world.master_key.trim_end_matches('=').to_owned(),
            ),
            ("the master key's hex", hex::encode(&master)),
            ("the credentials key", derived("fetcher-credentials-v1")),
            ("the internal HMAC key", derived("fetcher-internal-hmac-v1")),
            ("the external HMAC key", derived("fetcher-external-hmac-v1")),
            ("the storage key", derived("fetcher-storage-encryption-v1")),
            ("the PostgreSQL datasource password", format!("pgpw-{id}")),
            ("the hidden datasource password", format!("hiddenpw-{id}")),
            ("the MySQL datasource password", format!("mypw-{id}")),
            ("a stored connection password", format!("tablepw-{id}")),
            ("the DATABASE_URL password", format!("dburlpw-{id}")),
            ("the S3 secret", "fetcher-secret".to_owned()),
            ("the secret hostname", "db-secret-host".to_owned()),
            (
                "the stored connection's hostname",
                "vault-secret-host".to_owned(),
            ),
        ];
        Secrets { values }
    }

    /// The first secret found in `haystack` (searched case-insensitively, so hex in either
    /// case counts), with the text around it.
    fn find(&self, haystack: &str) -> Option<(&'static str, String)> {
        let lower = haystack.to_lowercase();
        self.values.iter().find_map(|(what, value)| {
            let at = lower.find(&value.to_lowercase())?;
            let context: String = lower
                .chars()
                .skip(lower[..at].chars().count().saturating_sub(200))
                .take(400 + value.len())
                .collect();
            Some((*what, context))
        })
    }

    fn assert_absent(&self, haystack: &str, place: &str) {
        if let Some((what, context)) = self.find(haystack) {
            panic!("{what} leaked into {place}: …{context}…");
        }
    }
}

fn env(
    world: &World,
    port: u16,
    format: &str,
    level: &str,
) -> std::collections::BTreeMap<String, String> {
    let id = &world.id;
    let mut env = world.env(port);
    for (k, v) in [
        ("LOG_FORMAT", format.to_owned()),
        ("LOG_LEVEL", level.to_owned()),
        (
            "DATABASE_URL",
            format!(
                "postgres://postgres:dburlpw-{id}@127.0.0.1:5432/{}",
                world.state_db
            ),
        ),
        ("DATASOURCE_DOWN_PASSWORD", format!("pgpw-{id}")),
        ("DATASOURCE_HIDDEN_TYPE", "POSTGRESQL".into()),
        ("DATASOURCE_HIDDEN_HOST", SECRET_HOST.into()),
        ("DATASOURCE_HIDDEN_PORT", "5432".into()),
        ("DATASOURCE_HIDDEN_DATABASE", "hidden".into()),
        ("DATASOURCE_HIDDEN_USER", "hidden".into()),
        ("DATASOURCE_HIDDEN_PASSWORD", format!("hiddenpw-{id}")),
        ("DATASOURCE_HIDDEN_SSLMODE", "disable".into()),
        ("DATASOURCE_MYDOWN_TYPE", "MYSQL".into()),
        ("DATASOURCE_MYDOWN_HOST", "127.0.0.1".into()),
        ("DATASOURCE_MYDOWN_PORT", "1".into()),
        ("DATASOURCE_MYDOWN_DATABASE", "nowhere".into()),
        ("DATASOURCE_MYDOWN_USER", "ghost".into()),
        ("DATASOURCE_MYDOWN_PASSWORD", format!("mypw-{id}")),
        ("DATASOURCE_MYDOWN_SSLMODE", "disable".into()),
        ("DATASOURCE_MYHIDDEN_TYPE", "MYSQL".into()),
        ("DATASOURCE_MYHIDDEN_HOST", SECRET_HOST.into()),
        ("DATASOURCE_MYHIDDEN_DATABASE", "nowhere".into()),
        ("DATASOURCE_MYHIDDEN_USER", "ghost".into()),
        ("DATASOURCE_MYHIDDEN_PASSWORD", format!("mypw-{id}")),
    ] {
        env.insert(k.to_owned(), v);
    }
    env
}

/// Connections stored in the state database: a sealed password behind an unresolvable host, a
/// password sealed under another key version, and one that does not decrypt.
async fn store_connections(world: &World) {
    let sealed = world
        .keys
        .credentials()
        .seal(format!("tablepw-{}", world.id).as_bytes());
    for (name, kind, host, port, password, version) in [
        (
            "vault",
            "POSTGRESQL",
            TABLE_SECRET_HOST,
            5432,
            sealed.clone(),
            "1",
        ),
        (
            "vault_local",
            "POSTGRESQL",
            "127.0.0.1",
            1,
            sealed.clone(),
            "1",
        ),
        ("vault_mysql", "MYSQL", "127.0.0.1", 1, sealed.clone(), "1"),
        (
            "vault_old_key",
            "POSTGRESQL",
            TABLE_SECRET_HOST,
            5432,
            sealed.clone(),
            "2",
        ),
        (
            "vault_garbled",
            "POSTGRESQL",
            TABLE_SECRET_HOST,
            5432,
            "Zm9vYmFy".to_owned(),
            "1",
        ),
    ] {
        sqlx::query(
            "INSERT INTO connections (name, type, host, port, database, username, password_sealed, \
             key_version, ssl_mode) VALUES ($1, $2, $3, $4, 'vaultdb', 'vaultuser', $5, $6, 'disable') \
             ON CONFLICT DO NOTHING",
        )
        .bind(name)
        .bind(kind)
        .bind(host)
        .bind(port)
        .bind(password)
        .bind(version)
        .execute(&world.state)
        .await
        .expect("insert connection");
    }
}

/// Runs one Worker with `format`/`level` logging, provokes every failure, and returns all it
/// said and published.
async fn provoke(world: &World, format: &str, level: &str) -> String {
    let port = free_port();
    let mut worker = WorkerProcess::spawn(env(world, port, format, level), port);
    worker.wait_ready(Duration::from_secs(60)).await;
    store_connections(world).await;
    let mut events = world.listen().await;
    let mut seen = String::new();

    let mut waiting = Vec::new();
    for (connection, table) in [
        ("nope", "payments"),
        ("down", "payments"),
        ("hidden", "payments"),
        ("mydown", "payments"),
        ("myhidden", "payments"),
        ("src", "missing_table"),
        ("vault", "payments"),
        ("vault_local", "payments"),
        ("vault_mysql", "payments"),
        ("vault_old_key", "payments"),
        ("vault_garbled", "payments"),
    ] {
        let job_id = Uuid::now_v7();
        world
            .submit(
                &world.job_body(job_id, connection, table, &["id"]),
                Some("acme"),
                &[("X-Request-Id", "req-secrets")],
            )
            .await;
        waiting.push((job_id, connection));
    }
    // Unparseable, with a job id in a header: a failed job. Without one: dropped.
    let broken = Uuid::now_v7();
    world
        .submit(b"{\"jobId\": ", None, &[("jobId", &broken.to_string())])
        .await;
    waiting.push((broken, "unparseable"));
    world.submit(b"\xff not json", None, &[]).await;
    // An invalid filter.
    let invalid = Uuid::now_v7();
    let body = format!(
        r#"{{"jobId":"{invalid}","mappedFields":{{"src":{{"payments":["id"]}}}},"filters":{{"src":{{"payments":{{"id":{{"between":[1]}}}}}}}}}}"#
    );
    world.submit(body.as_bytes(), None, &[]).await;
    waiting.push((invalid, "invalid filter"));
    // A bad signature: dead-lettered.
    let forged = world.job_body(Uuid::now_v7(), "down", "payments", &["id"]);
    let headers = signed(
        world,
        chrono::Utc::now().timestamp(),
        &work_route(world, ""),
        b"another body",
        None,
    );
    publish(&world.channel, "", &world.queue, &forged, &headers).await;

    for (job_id, what) in waiting {
        let event = events.event_for(job_id, Duration::from_secs(60)).await;
        assert_eq!(
            event.delivery.routing_key.as_str(),
            "job.failed",
            "{what} did not fail"
        );
        if let Some(message) = event.body()["metadata"]["error"]["message"].as_str() {
            eprintln!("secrets ({format}): {what}: {message}");
        }
        seen.push_str(&String::from_utf8_lossy(&event.delivery.data));
        seen.push('\n');
        seen.push_str(&format!("{:?}\n", event.delivery.properties));
    }

    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT row_to_json(j)::text FROM jobs j UNION ALL \
         SELECT convert_from(body, 'UTF8') || attributes::text || coalesce(last_error, '') FROM outbox",
    )
    .fetch_all(&world.state)
    .await
    .expect("state rows");
    seen.push_str(&rows.join("\n"));
    for path in ["/metrics", "/readyz", "/health"] {
        seen.push_str(&http_get(port, path).map(|r| r.1).unwrap_or_default());
    }
    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(60)).await, Some(0));
    // The output readers finish with the process.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let output = worker.output();
    assert!(
        output.contains("Job message dead-lettered") && output.contains("Job message dropped"),
        "the refusals were not logged"
    );
    format!("{seen}\n--- logs ---\n{output}")
}

#[tokio::test]
async fn no_secret_appears_in_logs_events_rows_or_metrics() {
    let world = World::new().await;
    let secrets = Secrets::of(&world);
    // The search itself finds a secret, in any case, wherever it sits.
    for (what, value) in &secrets.values {
        let planted = format!("prefix {} suffix", value.to_uppercase());
        assert!(secrets.find(&planted).is_some(), "the search missed {what}");
    }
    for (format, level) in [("json", "debug"), ("text", "info")] {
        let everything = provoke(&world, format, level).await;
        secrets.assert_absent(&everything, &format!("the {format} run at {level}"));
    }
    world.cleanup().await;
}

//! Secrets never leave the Worker: with a known master key, datasource passwords, an S3 secret,
//! secret host and user names and a password in `DATABASE_URL`, jobs are made to fail in every
//! way that can be provoked (among them real driver failures: a wrong password on MariaDB, an
//! unknown role on PostgreSQL, a name that does not resolve, TLS refused or untrusted), and
//! every log line (JSON and text), event, stored error, outbox row and health or metrics answer
//! is searched for each secret. The drain that ends each run must end within its documented
//! bound.

use std::time::Duration;

use uuid::Uuid;

use worker::config::ShutdownSettings;
use worker::shutdown::drain_limit;

use super::mariadb_user::MariaDbUser;
use super::secret_values::Secrets;
use crate::harness::{free_port, WorkerProcess, World};
use crate::harness::{http_get, publish, signed, work_route};

const SECRET_HOST: &str = "db-secret-host.invalid";
const TABLE_SECRET_HOST: &str = "vault-secret-host.invalid";
/// What each run's Worker is given, so the test knows how long its drain may take.
const SHUTDOWN: ShutdownSettings = ShutdownSettings {
    readyz_drain_delay: Duration::from_secs(2),
    grace: Duration::from_secs(20),
};
/// Beyond the drain's bound: SIGTERM's delivery, and the exit once the drain ended.
const EXIT_ALLOWANCE: Duration = Duration::from_secs(5);

fn env(
    world: &World,
    port: u16,
    format: &str,
    level: &str,
) -> std::collections::BTreeMap<String, String> {
    let id = &world.id;
    let mut env = world.env(port);
    let vars = [
        ("LOG_FORMAT", format.to_owned()),
        ("LOG_LEVEL", level.to_owned()),
        (
            "DATABASE_URL",
            format!(
                "postgres://postgres:dburlpw-{id}@127.0.0.1:5432/{}",
                world.state_db
            ),
        ),
        ("SHUTDOWN_GRACE_SEC", SHUTDOWN.grace.as_secs().to_string()),
        (
            "READYZ_DRAIN_DELAY_SEC",
            SHUTDOWN.readyz_drain_delay.as_secs().to_string(),
        ),
        ("DATASOURCE_DOWN_PASSWORD", format!("pgpw-{id}")),
    ];
    let datasources = [
        // name, type, host, port, user, password, sslmode ("" = the default, prefer)
        (
            "HIDDEN",
            "POSTGRESQL",
            SECRET_HOST,
            5432,
            "hiddenuser",
            "hiddenpw",
            "disable",
        ),
        (
            "MYDOWN",
            "MYSQL",
            "127.0.0.1",
            1,
            "myghost",
            "mypw",
            "disable",
        ),
        (
            "MYHIDDEN",
            "MYSQL",
            SECRET_HOST,
            3306,
            "myghost",
            "mypw",
            "",
        ),
        // A role PostgreSQL does not know: "password authentication failed", or with `trust`
        // "role ... does not exist".
        (
            "PGAUTH",
            "POSTGRESQL",
            "127.0.0.1",
            5432,
            "pgauth",
            "pgauthpw",
            "",
        ),
        // A MariaDB account that exists, with the wrong password: "Access denied".
        (
            "MYAUTH",
            "MYSQL",
            "127.0.0.1",
            3306,
            "myauth",
            "mywrongpw",
            "",
        ),
        // A single-label name that does not resolve.
        (
            "NXHOST",
            "POSTGRESQL",
            "nxhost",
            5432,
            "pgauth",
            "pgauthpw",
            "disable",
        ),
        // PostgreSQL's certificate is not one the Worker trusts.
        (
            "PGTLS",
            "POSTGRESQL",
            "127.0.0.1",
            5432,
            "pgtls",
            "tlspw",
            "verify-full",
        ),
        // The local MariaDB has no TLS.
        (
            "MYTLS",
            "MYSQL",
            "127.0.0.1",
            3306,
            "mytls",
            "tlspw",
            "require",
        ),
    ];
    let mut vars: Vec<(String, String)> =
        vars.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    for (name, kind, host, port, user, password, ssl_mode) in datasources {
        let host = if host == "nxhost" {
            format!("nxhost{id}")
        } else {
            host.to_owned()
        };
        let key = |field: &str| format!("DATASOURCE_{name}_{field}");
        vars.extend([
            (key("TYPE"), kind.to_owned()),
            (key("HOST"), host),
            (key("PORT"), port.to_string()),
            (key("DATABASE"), world.source_db.clone()),
            (key("USER"), format!("{user}{id}")),
            (key("PASSWORD"), format!("{password}-{id}")),
        ]);
        if !ssl_mode.is_empty() {
            vars.push((key("SSLMODE"), ssl_mode.to_owned()));
        }
    }
    env.extend(vars);
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
             key_version, ssl_mode) VALUES ($1, $2, $3, $4, 'vaultdb', $5, $6, $7, 'disable') \
             ON CONFLICT DO NOTHING",
        )
        .bind(name)
        .bind(kind)
        .bind(host)
        .bind(port)
        .bind(format!("vaultuser{}", world.id))
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
    // What each real driver failure must still say, so the test knows it provoked it.
    let mut meaning = std::collections::HashMap::new();
    for (connection, table, says) in [
        ("nope", "payments", &[][..]),
        ("down", "payments", &[]),
        ("hidden", "payments", &[]),
        ("mydown", "payments", &[]),
        ("myhidden", "payments", &[]),
        ("src", "missing_table", &[]),
        ("vault", "payments", &[]),
        ("vault_local", "payments", &[]),
        ("vault_mysql", "payments", &[]),
        ("vault_old_key", "payments", &[]),
        ("vault_garbled", "payments", &[]),
        (
            "pgauth",
            "payments",
            &["password authentication failed", "does not exist"],
        ),
        ("myauth", "payments", &["Access denied"]),
        (
            "nxhost",
            "payments",
            &["failed to connect to datasource nxhost"],
        ),
        ("pgtls", "payments", &["certificate"]),
        ("mytls", "payments", &["TLS"]),
    ] {
        meaning.insert(connection, says);
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
    publish(&world.broker.channel, "", &world.queue, &forged, &headers).await;

    for (job_id, what) in waiting {
        let event = events.event_for(job_id, Duration::from_secs(60)).await;
        assert_eq!(
            event.delivery.routing_key.as_str(),
            "job.failed",
            "{what} did not fail"
        );
        let message = event.body()["metadata"]["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        eprintln!("secrets ({format}): {what}: {message}");
        if let Some(says) = meaning.get(what).filter(|says| !says.is_empty()) {
            assert!(
                says.iter().any(|said| message.contains(said)),
                "{what} should fail saying one of {says:?}: {message}"
            );
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
    // Jobs on unreachable datasources may still be connecting: the drain waits for them, within
    // its documented bound, and then the process exits at once.
    worker.signal("TERM");
    let signalled = std::time::Instant::now();
    assert_eq!(
        worker
            .wait_exit(drain_limit(&SHUTDOWN) + EXIT_ALLOWANCE)
            .await,
        Some(0)
    );
    eprintln!(
        "secrets ({format}): exited {:?} after SIGTERM",
        signalled.elapsed()
    );
    // The output readers finish with the process.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let output = worker.output();
    assert!(
        output.contains("Job message dead-lettered") && output.contains("Job message dropped"),
        "the refusals were not logged"
    );
    assert!(
        output.contains("Fetcher Worker stopped.") && !output.contains("The drain did not end"),
        "the drain did not end by itself:\n{output}"
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
    let account = MariaDbUser::create(
        &format!("myauth{}", world.id),
        &format!("myrightpw-{}", world.id),
    )
    .await;
    for (format, level) in [("json", "debug"), ("text", "info")] {
        let everything = provoke(&world, format, level).await;
        secrets.assert_absent(&everything, &format!("the {format} run at {level}"));
    }
    account.remove().await;
    world.cleanup().await;
}

//! Retries of a datasource whose attempt failed transiently (`JOB_RETRY_ATTEMPTS`), against the
//! real server behind a flaky TCP proxy: a reset connection is retried up to the policy and no
//! further; a permanent failure never is; an attempt cut before its rows left the datasource is
//! read again whole (the document holds no row twice), one cut after is not; the wait ends at a
//! graceful stop and counts toward the job's timeout.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use engine::connection::{from_env_vars, Resolver};
use engine::{
    DatasourceEnd, Engine, EngineConfig, EngineError, Observer, Retry, RetryPolicy, TimeLimit,
    Watch,
};
use serde_json::json;
use support::harness::job;
use support::TestDb;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// 40,000 rows of about 40 bytes of JSON each: well over one chunk (128 KiB) of the result.
const NUMBERS: &str =
    "CREATE TABLE numbers AS SELECT id, 'row ' || id AS label FROM generate_series(1, 40000) id;";

/// A TCP proxy to the test server whose first connections fail: `reset` of them are reset as
/// soon as they are accepted, then `cut` more are reset once the server has sent `cut_after`
/// bytes through them; the rest are forwarded whole.
struct Flaky {
    port: u16,
    accepted: Arc<AtomicU64>,
}

impl Flaky {
    async fn start(db: &TestDb, reset: u64, cut: u64, cut_after: usize) -> Flaky {
        let target = format!("{}:{}", db.options.get_host(), db.options.get_port());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let accepted = Arc::new(AtomicU64::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let n = count.fetch_add(1, Ordering::SeqCst);
                if n < reset {
                    rst(&client);
                    drop(client);
                    continue;
                }
                let limit = (n < reset + cut).then_some(cut_after);
                let target = target.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(&target).await {
                        forward(client, server, limit).await;
                    }
                });
            }
        });
        Flaky { port, accepted }
    }

    fn connections(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Forwards both ways; with `limit`, resets both sides once the server sent that many bytes.
async fn forward(mut client: TcpStream, mut server: TcpStream, limit: Option<usize>) {
    let (mut cr, mut cw) = client.split();
    let (mut sr, mut sw) = server.split();
    let up = async {
        let _ = tokio::io::copy(&mut cr, &mut sw).await;
        let _ = sw.shutdown().await;
    };
    let down = async {
        let mut sent = 0usize;
        let mut buf = vec![0u8; 8192];
        loop {
            let n = match sr.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => n,
            };
            let allowed = limit.map_or(n, |limit| n.min(limit.saturating_sub(sent)));
            if cw.write_all(&buf[..allowed]).await.is_err() {
                return false;
            }
            sent += allowed;
            if allowed < n {
                return true;
            }
        }
    };
    let cut = tokio::select! {
        _ = up => false,
        cut = down => cut,
    };
    if cut {
        rst(&client);
        rst(&server);
    }
}

/// Makes the socket's close a TCP reset (the blocking close `SO_LINGER` is deprecated for is
/// none with a zero linger).
fn rst(stream: &TcpStream) {
    #[allow(deprecated)]
    let _ = stream.set_linger(Some(Duration::ZERO));
}

/// An engine reading `db` through `proxy` as the datasource `ledger`.
fn engine_through(proxy: &Flaky, db: &TestDb, retry: RetryPolicy) -> Engine {
    let vars = [
        ("CONFIG_NAME", "ledger".to_owned()),
        ("TYPE", "POSTGRESQL".into()),
        ("HOST", "127.0.0.1".into()),
        ("PORT", proxy.port.to_string()),
        ("DATABASE", db.name.clone()),
        ("USER", db.options.get_username().to_owned()),
        ("SSLMODE", "disable".into()),
    ]
    .into_iter()
    .map(|(suffix, value)| (format!("DATASOURCE_LEDGER_{suffix}"), value));
    let env = from_env_vars(vars).expect("valid test datasource");
    let config = EngineConfig {
        retry,
        // The pool's connections are not kept between attempts' connects in these tests.
        pool_max_connections: 1,
        ..EngineConfig::default()
    };
    Engine::new(config, Resolver::new(env, None))
}

fn retries(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        attempts,
        backoff: Duration::from_millis(20),
        backoff_max: Duration::from_millis(100),
    }
}

/// The retries and the end the engine told of.
#[derive(Default)]
struct Seen {
    retried: Mutex<Vec<(u32, bool)>>,
    errors: Mutex<Vec<String>>,
    ended: Mutex<Option<String>>,
}

impl Observer for Seen {
    fn started(&self, _: &str) {}
    fn progress(&self, _: &str, _: u64) {}
    fn retrying(&self, _: &str, retry: &Retry<'_>) {
        self.retried
            .lock()
            .unwrap()
            .push((retry.attempt, retry.error.is_transient()));
        self.errors.lock().unwrap().push(retry.error.to_string());
    }
    fn ended(&self, _: &str, end: &DatasourceEnd<'_>) {
        *self.ended.lock().unwrap() = Some(end.status().as_str().to_owned());
    }
}

async fn extract(
    engine: &Engine,
    table: &str,
    seen: &Arc<Seen>,
    graceful: CancellationToken,
    timeout: Duration,
) -> Result<serde_json::Value, EngineError> {
    let message = job(json!({"mappedFields": {"ledger": {table: ["id", "label"]}}}));
    let watch = Watch {
        observer: seen.clone(),
        graceful,
        ..Watch::none()
    };
    let extraction = engine
        .extract_within(
            &message.mapped_fields,
            &message.filters,
            TimeLimit::fresh(timeout),
            watch,
        )
        .await?;
    Ok(serde_json::from_slice(&extraction.plaintext).expect("the result is JSON"))
}

async fn numbers_db() -> TestDb {
    let db = TestDb::create().await;
    sqlx::raw_sql(NUMBERS)
        .execute(&db.pool)
        .await
        .expect("fixture");
    db
}

fn assert_all_numbers(document: &serde_json::Value) {
    let rows = document["ledger"]["numbers"].as_array().expect("rows");
    assert_eq!(rows.len(), 40_000, "every row once");
    assert_eq!(rows[0]["id"], 1);
    assert_eq!(rows[39_999]["id"], 40_000);
}

#[tokio::test]
async fn a_datasource_whose_connections_are_reset_twice_is_read_on_its_third_attempt() {
    let db = numbers_db().await;
    let proxy = Flaky::start(&db, 2, 0, 0).await;
    let engine = engine_through(&proxy, &db, retries(3));
    let seen = Arc::new(Seen::default());
    let document = extract(
        &engine,
        "numbers",
        &seen,
        CancellationToken::new(),
        Duration::from_secs(30),
    )
    .await
    .expect("the third attempt reads it");
    assert_all_numbers(&document);
    assert_eq!(*seen.retried.lock().unwrap(), [(1, true), (2, true)]);
    assert_eq!(seen.ended.lock().unwrap().as_deref(), Some("SUCCEEDED"));
    assert_eq!(proxy.connections(), 3);
    db.drop().await;
}

#[tokio::test]
async fn without_retries_a_reset_connection_fails_the_datasource_at_once() {
    let db = numbers_db().await;
    let proxy = Flaky::start(&db, 2, 0, 0).await;
    let engine = engine_through(&proxy, &db, retries(0));
    let seen = Arc::new(Seen::default());
    let error = extract(
        &engine,
        "numbers",
        &seen,
        CancellationToken::new(),
        Duration::from_secs(30),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, EngineError::Connect { .. }) && error.is_transient(),
        "{error:?}"
    );
    assert!(seen.retried.lock().unwrap().is_empty());
    assert_eq!(proxy.connections(), 1);
    db.drop().await;
}

#[tokio::test]
async fn retries_stop_at_the_policy() {
    let db = numbers_db().await;
    let proxy = Flaky::start(&db, 5, 0, 0).await;
    let engine = engine_through(&proxy, &db, retries(2));
    let seen = Arc::new(Seen::default());
    let error = extract(
        &engine,
        "numbers",
        &seen,
        CancellationToken::new(),
        Duration::from_secs(30),
    )
    .await
    .unwrap_err();
    assert!(error.is_transient(), "{error:?}");
    assert_eq!(seen.retried.lock().unwrap().len(), 2);
    assert_eq!(seen.ended.lock().unwrap().as_deref(), Some("FAILED"));
    assert_eq!(proxy.connections(), 3, "one attempt and two retries");
    db.drop().await;
}

#[tokio::test]
async fn a_missing_table_is_never_retried() {
    let db = numbers_db().await;
    let proxy = Flaky::start(&db, 0, 0, 0).await;
    let engine = engine_through(&proxy, &db, retries(10));
    let seen = Arc::new(Seen::default());
    let error = extract(
        &engine,
        "absent",
        &seen,
        CancellationToken::new(),
        Duration::from_secs(30),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, EngineError::Schema { .. }), "{error:?}");
    assert!(!error.is_transient());
    assert!(seen.retried.lock().unwrap().is_empty());
    assert_eq!(seen.ended.lock().unwrap().as_deref(), Some("REJECTED"));
    db.drop().await;
}

#[tokio::test]
async fn an_attempt_cut_before_its_rows_left_the_datasource_is_read_again_whole() {
    let db = numbers_db().await;
    // The catalog and the first rows (a few KiB, less than a chunk) come, then the reset.
    let proxy = Flaky::start(&db, 0, 1, 16 * 1024).await;
    let engine = engine_through(&proxy, &db, retries(1));
    let seen = Arc::new(Seen::default());
    let document = extract(
        &engine,
        "numbers",
        &seen,
        CancellationToken::new(),
        Duration::from_secs(30),
    )
    .await
    .expect("the retry reads it");
    assert_all_numbers(&document);
    assert_eq!(*seen.retried.lock().unwrap(), [(1, true)]);
    db.drop().await;
}

#[tokio::test]
async fn an_attempt_cut_after_some_rows_left_the_datasource_is_not_retried() {
    let db = numbers_db().await;
    // Well past the first 128 KiB chunk of the result.
    let proxy = Flaky::start(&db, 0, 1, 600 * 1024).await;
    let engine = engine_through(&proxy, &db, retries(3));
    let seen = Arc::new(Seen::default());
    let error = extract(
        &engine,
        "numbers",
        &seen,
        CancellationToken::new(),
        Duration::from_secs(30),
    )
    .await
    .unwrap_err();
    assert!(error.is_transient(), "a reset: {error:?}");
    assert!(
        seen.retried.lock().unwrap().is_empty(),
        "its first rows were in the result"
    );
    assert_eq!(proxy.connections(), 1);
    db.drop().await;
}

fn slow_retries() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        backoff: Duration::from_secs(60),
        backoff_max: Duration::from_secs(60),
    }
}

#[tokio::test]
async fn a_graceful_stop_ends_the_wait_for_a_retry_at_once() {
    let db = numbers_db().await;
    let proxy = Flaky::start(&db, 10, 0, 0).await;
    let engine = engine_through(&proxy, &db, slow_retries());
    let seen = Arc::new(Seen::default());
    let graceful = CancellationToken::new();
    let stop = graceful.clone();
    let watcher = seen.clone();
    tokio::spawn(async move {
        // Once the first retry waits (its wait is up to a minute).
        while watcher.retried.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.cancel();
    });
    let started = Instant::now();
    let error = extract(
        &engine,
        "numbers",
        &seen,
        graceful,
        Duration::from_secs(120),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, EngineError::Canceled), "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(seen.ended.lock().unwrap().as_deref(), Some("CANCELED"));
    db.drop().await;
}

#[tokio::test]
async fn the_wait_for_a_retry_counts_toward_the_jobs_timeout() {
    let db = numbers_db().await;
    let proxy = Flaky::start(&db, 10, 0, 0).await;
    let engine = engine_through(&proxy, &db, slow_retries());
    let seen = Arc::new(Seen::default());
    let started = Instant::now();
    let error = extract(
        &engine,
        "numbers",
        &seen,
        CancellationToken::new(),
        Duration::from_secs(1),
    )
    .await
    .unwrap_err();
    // Only three jittered waits all under a second in total (a chance of about 1 in 10^5)
    // would let the retries run out before the timeout.
    if seen.retried.lock().unwrap().len() < 3 {
        assert!(matches!(error, EngineError::Timeout(_)), "{error:?}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    db.drop().await;
}

/// A PostgreSQL server error classified by its SQLSTATE: a read that waited past `lock_timeout`
/// for a table another transaction holds locked (55P03) is retried, and reads the table once
/// the lock is gone.
#[tokio::test]
async fn a_lock_timeout_on_the_server_is_retried_until_the_lock_is_gone() {
    let db = numbers_db().await;
    let mut holder = db.pool.begin().await.expect("begin");
    sqlx::query("LOCK TABLE numbers IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *holder)
        .await
        .expect("lock");
    let vars = [
        ("CONFIG_NAME", "ledger".to_owned()),
        ("TYPE", "POSTGRESQL".into()),
        ("HOST", db.options.get_host().to_owned()),
        ("PORT", db.options.get_port().to_string()),
        ("DATABASE", db.name.clone()),
        ("USER", db.options.get_username().to_owned()),
        ("SSLMODE", "disable".into()),
        ("OPTIONS", "lock_timeout=200".into()),
    ]
    .into_iter()
    .map(|(suffix, value)| (format!("DATASOURCE_LEDGER_{suffix}"), value));
    let env = from_env_vars(vars).expect("valid test datasource");
    let config = EngineConfig {
        retry: retries(5),
        ..EngineConfig::default()
    };
    let engine = Engine::new(config, Resolver::new(env, None));
    let seen = Arc::new(Seen::default());
    let watcher = seen.clone();
    let release = tokio::spawn(async move {
        while watcher.retried.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        holder.commit().await.expect("release the lock");
    });
    let document = extract(
        &engine,
        "numbers",
        &seen,
        CancellationToken::new(),
        Duration::from_secs(30),
    )
    .await
    .expect("read once the lock is gone");
    release.await.expect("released");
    assert_all_numbers(&document);
    let retried = seen.retried.lock().unwrap().clone();
    assert!(!retried.is_empty() && retried.iter().all(|(_, transient)| *transient));
    let errors = seen.errors.lock().unwrap().clone();
    assert!(
        errors
            .iter()
            .all(|e| e.starts_with("query on datasource ledger failed: ")
                && e.contains("lock timeout")),
        "{errors:?}"
    );
    db.drop().await;
}

/// The pool lends a connection used within the last second untested: one the server killed
/// meanwhile (as a restart does) fails the read's first statement, and the read is taken again
/// at once on another connection, without retries (`JOB_RETRY_ATTEMPTS` 0) and without telling
/// the observer of a retry.
#[tokio::test]
async fn a_pooled_connection_killed_by_the_server_is_replaced_without_retries() {
    let db = numbers_db().await;
    let proxy = Flaky::start(&db, 0, 0, 0).await;
    let engine = engine_through(&proxy, &db, retries(0));
    let seen = Arc::new(Seen::default());
    let read = || {
        extract(
            &engine,
            "numbers",
            &seen,
            CancellationToken::new(),
            Duration::from_secs(30),
        )
    };
    assert_all_numbers(&read().await.expect("the first read"));
    let killed: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity, pg_terminate_backend(pid)
         WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(&db.name)
    .fetch_all(&db.pool)
    .await
    .expect("terminate the pooled connection");
    assert_eq!(killed.len(), 1, "the engine's pool held one connection");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)")
                .bind(&killed)
                .fetch_one(&db.pool)
                .await
                .expect("the killed connection");
        if left == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the killed connection stays");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_all_numbers(&read().await.expect("the read on a new connection"));
    assert!(seen.retried.lock().unwrap().is_empty());
    assert_eq!(proxy.connections(), 2, "one connection made again");
    db.drop().await;
}

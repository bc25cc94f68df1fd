//! [`World`]: what one test has to itself on the shared servers (state and source databases,
//! bucket, work queue, events exchange, master key), and the Worker's environment for it.
//!
//! The databases are testkit's [`TestDb`]s and the broker side is a testkit [`Broker`]; each
//! part removes itself, at [`World::cleanup`] or from its own `Drop` when the test panicked.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use base64::Engine as _;
use sqlx::PgPool;
use storage::ObjectStore;
use testkit::amqp::Broker;
use testkit::pg::TestDb;
use uuid::Uuid;

use super::s3::{self, TestBucket};
use super::WorkerProcess;

/// The `ce-source` of the Worker's events in every world.
pub const SOURCE: &str = "//test/fetcher";

/// The source database's tables: `payments` (3 rows) and `slow`, a view that takes 6 s.
const SOURCE_FIXTURE: &str = r#"
CREATE TABLE payments (id integer PRIMARY KEY, amount numeric(10,2), memo text);
INSERT INTO payments VALUES (1, 10.50, 'first <ok>'), (2, 20.00, 'second'), (3, NULL, 'third');
CREATE VIEW slow AS SELECT id FROM payments, pg_sleep(6);
"#;

/// The size of the test's own pool on the state database.
const STATE_CONNECTIONS: u32 = 3;

pub struct World {
    pub id: String,
    pub master_key: String,
    pub keys: crypto::KeySet,
    /// The state database's name.
    pub state_db: String,
    /// The source database's name.
    pub source_db: String,
    /// A pool on the state database.
    pub state: PgPool,
    pub bucket: String,
    pub objects: ObjectStore,
    pub queue: String,
    pub exchange: String,
    /// The test's own broker connection: it deletes the work queue, the events exchange and
    /// every queue the test tapped.
    pub broker: Broker,
    state_test_db: TestDb,
    source_test_db: TestDb,
    test_bucket: TestBucket,
}

impl World {
    pub async fn new() -> World {
        let id = Uuid::new_v4().simple().to_string()[..12].to_owned();
        let master_key =
            base64::engine::general_purpose::STANDARD.encode(Uuid::new_v4().as_bytes().repeat(2));
        let keys = crypto::KeySet::from_base64(&master_key).expect("key");
        let state_test_db = TestDb::create_with(STATE_CONNECTIONS).await;
        let source_test_db = TestDb::create_with(1).await;
        sqlx::raw_sql(SOURCE_FIXTURE)
            .execute(&source_test_db.pool)
            .await
            .expect("fixture");
        // The test reaches the source database only through the Worker (or a pool of its own).
        source_test_db.pool.close().await;

        let test_bucket = TestBucket::new(format!("fetcher-test-{id}"));
        let objects = ObjectStore::new(s3::storage_config(&test_bucket.name))
            .await
            .expect("object store");
        objects
            .create_bucket_if_missing()
            .await
            .expect("S3 is not reachable: start it with scripts/services.sh s3");

        let broker = Broker::connect().await;
        let queue = format!("fetcher.test.work.{id}");
        let exchange = format!("fetcher.test.events.{id}");
        // The Worker declares both; the world deletes them.
        broker.track_queue(&queue);
        broker.track_exchange(&exchange);
        World {
            id,
            master_key,
            keys,
            state_db: state_test_db.name.clone(),
            source_db: source_test_db.name.clone(),
            state: state_test_db.pool.clone(),
            bucket: test_bucket.name.clone(),
            objects,
            queue,
            exchange,
            broker,
            state_test_db,
            source_test_db,
            test_bucket,
        }
    }

    /// A URL of the state database.
    pub fn state_url(&self) -> &str {
        &self.state_test_db.url
    }

    /// A URL of the source database.
    pub fn source_url(&self) -> &str {
        &self.source_test_db.url
    }

    /// The Worker's environment for this world.
    pub fn env(&self, port: u16) -> BTreeMap<String, String> {
        let source = &self.source_test_db.options;
        let s3 = s3::server();
        let vars = [
            ("APP_ENC_KEY", self.master_key.clone()),
            ("STREAMING_ENABLED", "true".into()),
            ("STREAMING_CLOUDEVENTS_SOURCE", SOURCE.into()),
            ("RABBITMQ_JOB_EVENTS_EXCHANGE", self.exchange.clone()),
            ("RABBITMQ_FETCHER_WORK_QUEUE", self.queue.clone()),
            ("RABBITMQ_NUMBERS_OF_WORKERS", "3".into()),
            ("DATABASE_URL", self.state_url().to_owned()),
            ("OBJECT_STORAGE_ENDPOINT", s3.endpoint),
            ("OBJECT_STORAGE_BUCKET", self.bucket.clone()),
            ("OBJECT_STORAGE_ACCESS_KEY_ID", s3.access_key),
            ("OBJECT_STORAGE_SECRET_KEY", s3.secret_key),
            ("OBJECT_STORAGE_USE_PATH_STYLE", "true".into()),
            ("HEALTH_PORT", port.to_string()),
            // Each Worker its own control API port (tests that call it read it back).
            ("API_PORT", super::process::free_port().to_string()),
            ("READYZ_DRAIN_DELAY_SEC", "2".into()),
            ("JOB_LEASE_SEC", "3".into()),
            ("OUTBOX_REPAIR_INTERVAL_SEC", "2".into()),
            ("OUTBOX_REPAIR_GRACE_SEC", "1".into()),
            ("LOG_FORMAT", "json".into()),
            ("LOG_LEVEL", "info".into()),
            ("DATASOURCE_SRC_TYPE", "POSTGRESQL".into()),
            ("DATASOURCE_SRC_HOST", source.get_host().to_owned()),
            ("DATASOURCE_SRC_PORT", source.get_port().to_string()),
            ("DATASOURCE_SRC_DATABASE", self.source_db.clone()),
            ("DATASOURCE_SRC_USER", source.get_username().to_owned()),
            ("DATASOURCE_SRC_SSLMODE", "disable".into()),
            ("DATASOURCE_DOWN_TYPE", "POSTGRESQL".into()),
            ("DATASOURCE_DOWN_HOST", "127.0.0.1".into()),
            ("DATASOURCE_DOWN_PORT", "1".into()),
            ("DATASOURCE_DOWN_DATABASE", "nowhere".into()),
            ("DATASOURCE_DOWN_USER", "ghost".into()),
            ("DATASOURCE_DOWN_PASSWORD", "ds-secret-pw".into()),
            ("DATASOURCE_DOWN_SSLMODE", "disable".into()),
        ];
        let mut env: BTreeMap<String, String> =
            vars.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        if let Some(password) = url_password(&testkit::pg::admin_url()) {
            env.insert("DATASOURCE_SRC_PASSWORD".into(), password);
        }
        env.extend(broker_env());
        env
    }

    /// Starts a Worker and waits until `/readyz` says ready.
    pub async fn start_worker(&self) -> WorkerProcess {
        self.start_worker_with(Vec::new()).await
    }

    /// Starts a Worker with these variables besides the world's (datasources of other kinds,
    /// keys) and waits until ready.
    pub async fn start_worker_with(&self, extra: Vec<(String, String)>) -> WorkerProcess {
        self.start_worker_binary(&WorkerProcess::binary(), extra)
            .await
    }

    /// [`start_worker_with`](Self::start_worker_with), running the Worker binary at `path`.
    pub async fn start_worker_binary(
        &self,
        path: &str,
        extra: Vec<(String, String)>,
    ) -> WorkerProcess {
        let port = super::free_port();
        let mut env = self.env(port);
        env.extend(extra);
        let worker = WorkerProcess::spawn_binary(path, env, port);
        worker.wait_ready(Duration::from_secs(60)).await;
        worker
    }

    /// Starts a Worker with these variables besides the world's, waits until ready, and gives a
    /// client of its control API.
    pub async fn start_worker_with_api(
        &self,
        extra: Vec<(String, String)>,
    ) -> (WorkerProcess, super::ControlClient) {
        let port = super::free_port();
        let mut env = self.env(port);
        env.extend(extra);
        let api_port = env["API_PORT"].parse().expect("API_PORT");
        let worker = WorkerProcess::spawn(env, port);
        worker.wait_ready(Duration::from_secs(60)).await;
        let client = super::ControlClient {
            port: api_port,
            keys: self.keys.clone(),
        };
        (worker, client)
    }

    /// Statements running on the source database that read its `slow` view.
    pub async fn slow_queries(&self) -> i64 {
        sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = $1 AND query ILIKE '%FROM%slow%' AND state = 'active'
               AND pid <> pg_backend_pid()",
        )
        .bind(&self.source_db)
        .fetch_one(&self.state)
        .await
        .expect("pg_stat_activity")
    }

    /// Variables defining datasources `names` as copies of `src` (the source database), each
    /// with a pool of its own.
    pub fn source_aliases(&self, names: &[&str]) -> Vec<(String, String)> {
        let env = self.env(0);
        let mut vars = Vec::new();
        for name in names {
            for (key, value) in &env {
                if let Some(setting) = key.strip_prefix("DATASOURCE_SRC_") {
                    let alias = format!("DATASOURCE_{}_{setting}", name.to_uppercase());
                    vars.push((alias, value.clone()));
                }
            }
        }
        vars
    }

    /// The job's executions, `(datasource, status)` by name, as the state database has them.
    pub async fn executions(&self, job_id: Uuid) -> Vec<(String, String)> {
        sqlx::query_as(
            "SELECT datasource, status FROM job_executions WHERE job_id = $1 ORDER BY datasource",
        )
        .bind(job_id)
        .fetch_all(&self.state)
        .await
        .expect("job_executions")
    }

    pub async fn job_status(&self, job_id: Uuid) -> Option<String> {
        sqlx::query_scalar("SELECT status FROM jobs WHERE job_id = $1")
            .bind(job_id)
            .fetch_optional(&self.state)
            .await
            .ok()
            .flatten()
    }

    /// Waits until the job's row has `status`.
    pub async fn wait_status(&self, job_id: Uuid, status: &str, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if self.job_status(job_id).await.as_deref() == Some(status) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "job {job_id} never reached {status} (now {:?})",
                self.job_status(job_id).await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A stored result object, opened with the storage key: its plaintext.
    pub async fn open_object(&self, path: &str) -> Result<Vec<u8>, String> {
        let sealed = self
            .objects
            .get(path)
            .await
            .map_err(|e| format!("stored object {path}: {e}"))?;
        self.keys
            .storage()
            .open_bytes(&sealed)
            .map_err(|e| format!("stored object {path} does not open: {e}"))
    }

    pub async fn object_keys(&self) -> Vec<String> {
        s3::bucket_keys(&self.bucket).await.expect("list objects")
    }

    /// Removes everything the world created. A world dropped without it (its test panicked)
    /// has each part remove itself from its `Drop`.
    pub async fn cleanup(self) {
        let mut broker = self.broker;
        // A test that made the broker close the channel still has its queues deleted.
        if !broker.channel.status().connected() {
            broker.reconnect().await;
        }
        broker.close().await;
        self.state_test_db.drop().await;
        self.source_test_db.drop().await;
        self.test_bucket.remove().await;
    }
}

/// The Worker's broker settings when `TEST_AMQP_URI` names another broker than the local one
/// (the Worker's defaults): the URI taken apart into its `RABBITMQ_*` settings.
fn broker_env() -> Vec<(String, String)> {
    let Ok(uri) = std::env::var("TEST_AMQP_URI") else {
        return Vec::new();
    };
    let parsed: lapin::uri::AMQPUri = uri
        .parse()
        .unwrap_or_else(|e| panic!("TEST_AMQP_URI is not an AMQP URI: {e}"));
    let authority = parsed.authority;
    [
        ("RABBITMQ_HOST", authority.host),
        ("RABBITMQ_PORT_AMQP", authority.port.to_string()),
        ("RABBITMQ_DEFAULT_USER", authority.userinfo.username),
        ("RABBITMQ_DEFAULT_PASS", authority.userinfo.password),
        ("RABBITMQ_VHOST", parsed.vhost),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// The password of a `scheme://user:password@host/...` URL (`TEST_DATABASE_URL`), decoded.
pub(super) fn url_password(url: &str) -> Option<String> {
    let rest = &url[url.find("://")? + 3..];
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    let userinfo = &authority[..authority.rfind('@')?];
    let encoded = &userinfo[userinfo.find(':')? + 1..];
    let bytes = encoded.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                i += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&decoded).into_owned())
}

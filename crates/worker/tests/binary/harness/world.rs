//! One isolated world per test (state and source databases, bucket, work queue, events
//! exchange, master key), the Worker process, a signed-job submitter and an events listener.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use contract::envelope::{self, HeaderValue, Route, SignatureHeaders, VerifyPolicy};
use futures_util::StreamExt;
use lapin::message::Delivery;
use lapin::options::*;
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection as _, PgConnection, PgPool};
use storage::{ObjectStore, StaticCredentials, StorageConfig};
use uuid::Uuid;

pub const AMQP: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
pub const ADMIN_DB: &str = "postgres://postgres@127.0.0.1:5432/postgres";
pub const SOURCE: &str = "//test/fetcher";

/// The source database's tables: `payments` (3 rows) and `slow`, a view that takes 6 s.
const SOURCE_FIXTURE: &str = r#"
CREATE TABLE payments (id integer PRIMARY KEY, amount numeric(10,2), memo text);
INSERT INTO payments VALUES (1, 10.50, 'first <ok>'), (2, 20.00, 'second'), (3, NULL, 'third');
CREATE VIEW slow AS SELECT id FROM payments, pg_sleep(6);
"#;

pub struct World {
    pub id: String,
    pub master_key: String,
    pub keys: crypto::KeySet,
    pub state_db: String,
    pub source_db: String,
    pub state: PgPool,
    pub bucket: String,
    pub objects: ObjectStore,
    pub queue: String,
    pub exchange: String,
    pub amqp: Connection,
    pub channel: Channel,
    cleaned: bool,
}

async fn create_db(name: &str) -> PgPool {
    let mut admin = PgConnection::connect(ADMIN_DB)
        .await
        .expect("PostgreSQL is not reachable: start it with scripts/services.sh postgres");
    sqlx::raw_sql(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut admin)
        .await
        .expect("create database");
    PgPoolOptions::new()
        .max_connections(3)
        .connect(&format!("postgres://postgres@127.0.0.1:5432/{name}"))
        .await
        .expect("connect database")
}

impl World {
    pub async fn new() -> World {
        let id = Uuid::new_v4().simple().to_string()[..12].to_owned();
        let master_key =
            base64::engine::general_purpose::STANDARD.encode(Uuid::new_v4().as_bytes().repeat(2));
        let keys = crypto::KeySet::from_base64(&master_key).expect("key");
        let state_db = format!("fetcher_test_state_{id}");
        let source_db = format!("fetcher_test_src_{id}");
        let state = create_db(&state_db).await;
        let source = create_db(&source_db).await;
        sqlx::raw_sql(SOURCE_FIXTURE)
            .execute(&source)
            .await
            .expect("fixture");
        source.close().await;

        let bucket = format!("fetcher-test-{id}");
        let objects = ObjectStore::new(storage_config(&bucket))
            .await
            .expect("object store");
        objects
            .create_bucket_if_missing()
            .await
            .expect("S3 is not reachable: start it with scripts/services.sh s3");

        let amqp = Connection::connect(AMQP, ConnectionProperties::default())
            .await
            .expect("RabbitMQ is not reachable: start it with scripts/services.sh rabbitmq");
        let channel = amqp.create_channel().await.expect("channel");
        World {
            id: id.clone(),
            master_key,
            keys,
            state_db,
            source_db,
            state,
            bucket,
            objects,
            queue: format!("fetcher.test.work.{id}"),
            exchange: format!("fetcher.test.events.{id}"),
            amqp,
            channel,
            cleaned: false,
        }
    }

    /// The Worker's environment for this world.
    pub fn env(&self, port: u16) -> BTreeMap<String, String> {
        let vars = [
            ("APP_ENC_KEY", self.master_key.clone()),
            ("STREAMING_ENABLED", "true".into()),
            ("STREAMING_CLOUDEVENTS_SOURCE", SOURCE.into()),
            ("RABBITMQ_JOB_EVENTS_EXCHANGE", self.exchange.clone()),
            ("RABBITMQ_FETCHER_WORK_QUEUE", self.queue.clone()),
            ("RABBITMQ_NUMBERS_OF_WORKERS", "3".into()),
            (
                "DATABASE_URL",
                format!("postgres://postgres@127.0.0.1:5432/{}", self.state_db),
            ),
            ("OBJECT_STORAGE_ENDPOINT", "http://127.0.0.1:9000".into()),
            ("OBJECT_STORAGE_BUCKET", self.bucket.clone()),
            ("OBJECT_STORAGE_ACCESS_KEY_ID", "fetcher".into()),
            ("OBJECT_STORAGE_SECRET_KEY", "fetcher-secret".into()),
            ("OBJECT_STORAGE_USE_PATH_STYLE", "true".into()),
            ("HEALTH_PORT", port.to_string()),
            ("READYZ_DRAIN_DELAY_SEC", "2".into()),
            ("JOB_LEASE_SEC", "3".into()),
            ("OUTBOX_REPAIR_INTERVAL_SEC", "2".into()),
            ("OUTBOX_REPAIR_GRACE_SEC", "1".into()),
            ("LOG_FORMAT", "json".into()),
            ("LOG_LEVEL", "info".into()),
            ("DATASOURCE_SRC_TYPE", "POSTGRESQL".into()),
            ("DATASOURCE_SRC_HOST", "127.0.0.1".into()),
            ("DATASOURCE_SRC_PORT", "5432".into()),
            ("DATASOURCE_SRC_DATABASE", self.source_db.clone()),
            ("DATASOURCE_SRC_USER", "postgres".into()),
            ("DATASOURCE_SRC_SSLMODE", "disable".into()),
            ("DATASOURCE_DOWN_TYPE", "POSTGRESQL".into()),
            ("DATASOURCE_DOWN_HOST", "127.0.0.1".into()),
            ("DATASOURCE_DOWN_PORT", "1".into()),
            ("DATASOURCE_DOWN_DATABASE", "nowhere".into()),
            ("DATASOURCE_DOWN_USER", "ghost".into()),
            ("DATASOURCE_DOWN_PASSWORD", "ds-secret-pw".into()),
            ("DATASOURCE_DOWN_SSLMODE", "disable".into()),
        ];
        vars.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    /// Starts a Worker and waits until `/readyz` says ready.
    pub async fn start_worker(&self) -> WorkerProcess {
        let port = free_port();
        let worker = WorkerProcess::spawn(self.env(port), port);
        worker.wait_ready(Duration::from_secs(60)).await;
        worker
    }

    /// Declares `queue` (auto-deleted with its consumer), binds it to `exchange` with
    /// `routing_key` and consumes it without acknowledgements.
    pub async fn tap(&self, queue: &str, exchange: &str, routing_key: &str) -> lapin::Consumer {
        self.channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    auto_delete: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("declare {queue}: {e}"));
        self.channel
            .queue_bind(
                queue.into(),
                exchange.into(),
                routing_key.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("bind {queue} to {exchange}: {e}"));
        self.channel
            .basic_consume(
                queue.into(),
                "".into(),
                BasicConsumeOptions {
                    no_ack: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("consume {queue}: {e}"))
    }

    /// A queue bound to the events exchange (declared here too: the Worker declares it the same).
    pub async fn listen(&self) -> Listener {
        self.channel
            .exchange_declare(
                self.exchange.as_str().into(),
                ExchangeKind::Topic,
                ExchangeDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .expect("declare exchange");
        let queue = format!("fetcher.test.listen.{}", Uuid::new_v4().simple());
        let consumer = self.tap(&queue, &self.exchange, "job.*").await;
        Listener {
            consumer,
            skipped: Vec::new(),
        }
    }

    /// A job body for the source database.
    pub fn job_body(
        &self,
        job_id: Uuid,
        connection: &str,
        table: &str,
        fields: &[&str],
    ) -> Vec<u8> {
        serde_json::json!({
            "jobId": job_id,
            "mappedFields": {connection: {table: fields}},
            "metadata": {"source": "e2e", "correlationId": self.id},
        })
        .to_string()
        .into_bytes()
    }

    /// Publishes `body` to the work queue, signed with the internal key.
    pub async fn submit(&self, body: &[u8], tenant: Option<&str>, extra: &[(&str, &str)]) {
        self.submit_signed_at(body, tenant, extra, chrono::Utc::now().timestamp())
            .await;
    }

    /// [`submit`](Self::submit), signed as of Unix second `signed_at`.
    pub async fn submit_signed_at(
        &self,
        body: &[u8],
        tenant: Option<&str>,
        extra: &[(&str, &str)],
        signed_at: i64,
    ) {
        let route = Route {
            tenant: tenant.unwrap_or(""),
            exchange: "",
            routing_key: &self.queue,
        };
        let signature = envelope::sign(signed_at, &route, body, |p| {
            self.keys.internal_hmac().sign_hex(p)
        });
        let mut headers = vec![
            (envelope::SIGNATURE_HEADER, signature.signature.clone()),
            (envelope::TIMESTAMP_HEADER, signature.timestamp.clone()),
            (envelope::VERSION_HEADER, signature.version.to_owned()),
        ];
        if let Some(tenant) = tenant {
            headers.push(("X-Tenant-ID", tenant.to_owned()));
        }
        for (name, value) in extra {
            headers.retain(|(n, _)| n != name);
            headers.push((name, value.to_string()));
        }
        self.publish_raw(body, &headers).await;
    }

    /// Publishes to the work queue with exactly these headers.
    pub async fn publish_raw(&self, body: &[u8], headers: &[(&str, String)]) {
        let mut table = FieldTable::default();
        for (name, value) in headers {
            table.insert(
                (*name).into(),
                AMQPValue::LongString(LongString::from(value.as_str())),
            );
        }
        self.channel
            .basic_publish(
                "".into(),
                self.queue.as_str().into(),
                BasicPublishOptions::default(),
                body,
                BasicProperties::default()
                    .with_delivery_mode(2)
                    .with_headers(table),
            )
            .await
            .expect("publish");
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
        bucket_keys(&self.bucket).await.expect("list objects")
    }

    /// Removes everything the world created. A world dropped without it (its test panicked)
    /// removes the same from `Drop`.
    pub async fn cleanup(mut self) {
        let _ = self.amqp.close(200, "OK".into()).await;
        self.state.close().await;
        self.created().remove().await;
        self.cleaned = true;
    }

    /// The names of what the world created on the servers.
    fn created(&self) -> Created {
        Created {
            bucket: self.bucket.clone(),
            queue: self.queue.clone(),
            exchange: self.exchange.clone(),
            databases: [self.state_db.clone(), self.source_db.clone()],
        }
    }
}

/// What a world created, by name only, so it can be removed from another thread's runtime.
struct Created {
    bucket: String,
    queue: String,
    exchange: String,
    databases: [String; 2],
}

impl Created {
    /// Removes all of it, best effort.
    async fn remove(self) {
        let s3 = s3_client();
        for key in bucket_keys(&self.bucket).await.unwrap_or_default() {
            let _ = s3
                .delete_object()
                .bucket(&self.bucket)
                .key(key)
                .send()
                .await;
        }
        let _ = s3.delete_bucket().bucket(&self.bucket).send().await;
        if let Ok(amqp) = Connection::connect(AMQP, ConnectionProperties::default()).await {
            if let Ok(channel) = amqp.create_channel().await {
                let _ = channel
                    .queue_delete(self.queue.as_str().into(), QueueDeleteOptions::default())
                    .await;
                let _ = channel
                    .exchange_delete(
                        self.exchange.as_str().into(),
                        ExchangeDeleteOptions::default(),
                    )
                    .await;
            }
            let _ = amqp.close(200, "OK".into()).await;
        }
        if let Ok(mut admin) = PgConnection::connect(ADMIN_DB).await {
            for db in self.databases {
                let _ = sqlx::raw_sql(&format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"))
                    .execute(&mut admin)
                    .await;
            }
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if !self.cleaned {
            let created = self.created();
            testkit::cleanup::run_detached(move || created.remove());
        }
    }
}

/// Every key of `bucket`.
async fn bucket_keys(bucket: &str) -> Result<Vec<String>, String> {
    let listed = s3_client()
        .list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    Ok(listed
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect())
}

/// A plain SDK client for the test server, to look behind the Worker's back.
pub fn s3_client() -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .endpoint_url("http://127.0.0.1:9000")
        .force_path_style(true)
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            "fetcher",
            "fetcher-secret",
            None,
            None,
            "test",
        ))
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

pub fn storage_config(bucket: &str) -> StorageConfig {
    StorageConfig {
        endpoint: Some("http://127.0.0.1:9000".into()),
        credentials: Some(StaticCredentials::new("fetcher", "fetcher-secret")),
        use_path_style: true,
        ..StorageConfig::new(bucket)
    }
}

/// A received event.
pub struct Event {
    pub delivery: Delivery,
}

impl Event {
    pub fn header(&self, name: &str) -> Option<&AMQPValue> {
        self.delivery
            .properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get(name))
    }

    pub fn text(&self, name: &str) -> String {
        match self.header(name) {
            Some(AMQPValue::LongString(s)) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
            Some(AMQPValue::ByteArray(b)) => String::from_utf8_lossy(b.as_slice()).into_owned(),
            other => panic!("header {name}: {other:?}"),
        }
    }

    pub fn body(&self) -> serde_json::Value {
        serde_json::from_slice(&self.delivery.data).expect("event body is JSON")
    }

    /// Verifies the event's signature with the external key.
    pub fn verify(&self, keys: &crypto::KeySet) -> Result<(), envelope::SignatureError> {
        let value = |name: &str| match self.header(name) {
            Some(AMQPValue::LongString(s)) => Some(HeaderValue::Text(s.as_bytes())),
            Some(_) => Some(HeaderValue::Other("other")),
            None => None,
        };
        let tenant = self.text("X-Tenant-ID");
        let route = Route {
            tenant: &tenant,
            exchange: self.delivery.exchange.as_str(),
            routing_key: self.delivery.routing_key.as_str(),
        };
        let headers = SignatureHeaders {
            signature: value("x-message-signature"),
            timestamp: value("t"),
            version: value("signature-version"),
        };
        envelope::verify(
            &headers,
            &route,
            &self.delivery.data,
            &VerifyPolicy::default(),
            chrono::Utc::now().timestamp(),
            |p, s| keys.external_hmac().verify_hex_parts(p, s),
        )
        .map(drop)
    }
}

pub struct Listener {
    consumer: lapin::Consumer,
    /// Events received while waiting for another job's, kept for later `event_for` calls.
    skipped: Vec<Event>,
}

impl Listener {
    /// The next event, or `None` after `within`.
    pub async fn next(&mut self, within: Duration) -> Option<Event> {
        match tokio::time::timeout(within, self.consumer.next()).await {
            Ok(Some(Ok(delivery))) => Some(Event { delivery }),
            Ok(Some(Err(error))) => panic!("listener failed: {error}"),
            Ok(None) => panic!("listener ended"),
            Err(_) => None,
        }
    }

    /// Waits for `job_id`'s next event, skipping others.
    pub async fn event_for(&mut self, job_id: Uuid, within: Duration) -> Event {
        let subject = job_id.to_string();
        if let Some(i) = self
            .skipped
            .iter()
            .position(|e| e.text("ce-subject") == subject)
        {
            return self.skipped.remove(i);
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = self
                .next(left)
                .await
                .unwrap_or_else(|| panic!("no event for job {job_id} within {within:?}"));
            if event.text("ce-subject") == subject {
                return event;
            }
            self.skipped.push(event);
        }
    }

    /// Every event that arrives within `within`.
    pub async fn drain(&mut self, within: Duration) -> Vec<Event> {
        let mut events = Vec::new();
        let deadline = Instant::now() + within;
        while let Some(event) = self
            .next(deadline.saturating_duration_since(Instant::now()))
            .await
        {
            events.push(event);
        }
        events
    }
}

/// GET on a Worker's health port: status and body (`None` when nothing answered).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    Some((status, body))
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// A running `fetcher-worker`, its output captured.
pub struct WorkerProcess {
    pub child: Child,
    pub port: u16,
    pub output: Arc<Mutex<String>>,
}

impl WorkerProcess {
    pub fn spawn(env: BTreeMap<String, String>, port: u16) -> WorkerProcess {
        WorkerProcess::start(Command::new(WorkerProcess::binary()), env, port)
    }

    /// The Worker binary the tests run: `TEST_WORKER_BIN` runs another build (the release
    /// binary, to measure it).
    pub fn binary() -> String {
        std::env::var("TEST_WORKER_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_fetcher-worker").to_owned())
    }

    /// Starts `command` (the Worker, or a wrapper that execs it) with exactly `env` and `PATH`,
    /// capturing its output.
    pub fn start(mut command: Command, env: BTreeMap<String, String>, port: u16) -> WorkerProcess {
        let mut child = command
            .env_clear()
            .envs(env)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn fetcher-worker");
        let output = Arc::new(Mutex::new(String::new()));
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let output = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    if std::env::var_os("TEST_LOG").is_some() {
                        eprintln!("[worker] {line}");
                    }
                    let mut out = output.lock().unwrap_or_else(|e| e.into_inner());
                    out.push_str(&line);
                    out.push('\n');
                }
            });
        }
        WorkerProcess {
            child,
            port,
            output,
        }
    }

    pub fn output(&self) -> String {
        self.output
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// GET `path` on the health port: status code and body.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(self.port, path)
    }

    pub async fn wait_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            if let Some((200, _)) = self.get("/readyz") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the Worker never became ready; output:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits for the process to exit; its exit code.
    /// Waits until `times` lines of the output match `matches`; `what` names them in the failure.
    pub async fn wait_for_lines(
        &self,
        what: &str,
        times: usize,
        within: Duration,
        matches: impl Fn(&str) -> bool,
    ) {
        let deadline = Instant::now() + within;
        loop {
            let output = self.output();
            let found = output.lines().filter(|line| matches(line)).count();
            if found >= times {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{found} of {times} lines of {what} logged within {within:?}; output:\n{output}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether the process has exited by now.
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    pub async fn wait_exit(&mut self, within: Duration) -> Option<i32> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            assert!(
                Instant::now() < deadline,
                "the Worker did not exit; output:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

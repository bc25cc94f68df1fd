//! The Manager mode (issue 35): the Worker keeps its state in the Manager's MongoDB, beside a
//! stand-in for the Go Manager (`testkit::manager`) that creates each job document and reads it
//! back as the Manager's `GET` does. After each job, the document has exactly the fields and
//! types the Go Worker leaves (docs/UPSTREAM-MANAGER.md §1, §9).

use std::collections::BTreeMap;
use std::time::Duration;

use mongodb::bson::{doc, Bson, Document};
use testkit::manager::{Manager, NewJob, MARKER_KEYS};
use testkit::mongo::MongoDb;
use uuid::Uuid;

use crate::harness::{
    publish, signed, wait_terminal_event_published, work_route, ControlClient, Listener,
    WorkerProcess, World,
};

/// A world whose Worker runs in the Manager mode, and the Manager beside it.
pub(super) struct ManagerWorld {
    pub world: World,
    pub mongo: MongoDb,
    pub manager: Manager,
}

impl ManagerWorld {
    pub async fn new() -> ManagerWorld {
        let world = World::new().await;
        let mongo = MongoDb::create().await;
        let manager = Manager::new(mongo.db());
        manager.ensure_indexes().await;
        ManagerWorld {
            world,
            mongo,
            manager,
        }
    }

    /// The world's environment with the Manager's MongoDB for the state, as the chart sets it:
    /// no `DATABASE_URL`, no control API.
    pub(super) fn env(&self, port: u16) -> BTreeMap<String, String> {
        let mut env = self.world.env(port);
        env.remove("DATABASE_URL");
        env.remove("API_PORT");
        let (host, mongo_port) = self.mongo.host_port();
        for (name, value) in [
            ("MONGO_URI", "mongodb".to_owned()),
            ("MONGO_HOST", host.to_owned()),
            ("MONGO_PORT", mongo_port.to_string()),
            ("MONGO_NAME", self.mongo.name.clone()),
            ("MONGO_MAX_POOL_SIZE", "10".to_owned()),
            // The test server speaks no TLS.
            ("ALLOW_INSECURE_TLS", "true".to_owned()),
        ] {
            env.insert(name.to_owned(), value);
        }
        env
    }

    pub async fn start_worker(&self) -> WorkerProcess {
        self.start_worker_with(&[]).await
    }

    /// A Worker with these variables besides [`env`](Self::env)'s, once ready.
    pub(super) async fn start_worker_with(&self, extra: &[(&str, &str)]) -> WorkerProcess {
        let port = crate::harness::free_port();
        let mut env = self.env(port);
        for (name, value) in extra {
            env.insert((*name).to_owned(), (*value).to_owned());
        }
        let worker = WorkerProcess::spawn(env, port);
        worker.wait_ready(Duration::from_secs(60)).await;
        worker
    }

    /// A Worker with the control API, asked for explicitly (`API_ENABLED=true`), and its client.
    pub async fn start_worker_with_api(&self) -> (WorkerProcess, ControlClient) {
        let port = crate::harness::free_port();
        let api_port = crate::harness::free_port();
        let mut env = self.env(port);
        env.insert("API_ENABLED".to_owned(), "true".to_owned());
        env.insert("API_PORT".to_owned(), api_port.to_string());
        let worker = WorkerProcess::spawn(env, port);
        worker.wait_ready(Duration::from_secs(60)).await;
        let client = ControlClient {
            port: api_port,
            keys: self.world.keys.clone(),
        };
        (worker, client)
    }

    /// The job as the Manager creates it, its message not published yet.
    pub async fn create(&self, table: &str, fields: &[&str]) -> (Uuid, NewJob) {
        self.create_on("src", table, fields, Document::new()).await
    }

    /// [`create`](Self::create) on the connection named `connection`, with `more` metadata
    /// after the world's (jobs of one table then are requests of their own: the Manager's
    /// unique request hash).
    pub(super) async fn create_on(
        &self,
        connection: &str,
        table: &str,
        fields: &[&str],
        more: Document,
    ) -> (Uuid, NewJob) {
        let field_list: Vec<Bson> = fields.iter().map(|f| Bson::from(*f)).collect();
        let mut metadata = doc! {"source": "e2e", "correlationId": &self.world.id};
        metadata.extend(more);
        let job = NewJob {
            mapped_fields: doc! {connection: {table: field_list}},
            filters: Document::new(),
            metadata,
        };
        let job_id = self.manager.create_job(&job).await.expect("create the job");
        (job_id, job)
    }

    /// Creates the job as the Manager does, then publishes its signed message.
    pub async fn submit(&self, table: &str, fields: &[&str]) -> (Uuid, NewJob) {
        self.submit_on("src", table, fields).await
    }

    /// [`submit`](Self::submit) on the connection named `connection`.
    async fn submit_on(&self, connection: &str, table: &str, fields: &[&str]) -> (Uuid, NewJob) {
        let (job_id, job) = self
            .create_on(connection, table, fields, Document::new())
            .await;
        self.world
            .submit_job(job_id, connection, table, fields)
            .await;
        (job_id, job)
    }

    pub async fn cleanup(self) {
        self.mongo.drop().await;
        self.world.cleanup().await;
    }
}

/// The stored document's keys, sorted: what the Manager and Go code find in it.
fn keys(stored: &Document) -> Vec<&str> {
    let mut keys: Vec<&str> = stored.keys().map(String::as_str).collect();
    keys.sort_unstable();
    keys
}

/// Waits until the job's terminal markers are cleared (its event's outbox row is written).
async fn markers_cleared(manager: &Manager, job_id: Uuid) -> Document {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let stored = manager.stored(job_id).await.expect("the job");
        let metadata = stored.get_document("metadata").cloned().unwrap_or_default();
        if MARKER_KEYS.iter().all(|key| !metadata.contains_key(*key)) {
            return stored;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "markers still set: {stored:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_job_the_manager_created_completes_and_the_manager_reads_it_back() {
    let m = ManagerWorld::new().await;
    let mut worker = m.start_worker().await;
    let mut events: Listener = m.world.listen().await;

    let (job_id, job) = m.submit("payments", &["memo", "id", "amount"]).await;
    let plaintext = m.world.completed_result(&mut events, job_id).await;
    let rows: serde_json::Value = serde_json::from_slice(&plaintext).expect("result JSON");
    assert_eq!(rows["src"]["payments"].as_array().map(Vec::len), Some(3));

    let stored = markers_cleared(&m.manager, job_id).await;
    let got = m.manager.get_job(job_id).await.expect("the Manager's GET");
    assert_eq!(got.status, "completed");
    assert_eq!(
        got.result_path.as_deref(),
        Some(format!("external-data/{job_id}.json").as_str())
    );
    assert_eq!(
        got.result_hmac.as_deref(),
        Some(m.world.keys.external_hmac().sign_hex(&plaintext).as_str())
    );
    assert!(got.completed_at.is_some());
    assert_eq!(stored.get("dedup_active"), Some(&Bson::Boolean(false)));
    assert_eq!(
        got.metadata,
        Some(doc! {"source": "e2e", "correlationId": &m.world.id}),
        "the request's metadata, nothing of the Worker's"
    );
    // Only upstream's fields and this Worker's own sub-document.
    assert_eq!(
        keys(&stored),
        [
            "_id",
            "completed_at",
            "created_at",
            "dedup_active",
            "fetcher_worker",
            "mapped_fields",
            "metadata",
            "request_hash",
            "result_hmac",
            "result_path",
            "status",
        ]
    );
    // The Manager's unique `request_hash` index lets the same request in again.
    m.manager
        .create_job(&job)
        .await
        .expect("a new job with the same request hash");

    // A second delivery of the same message runs nothing again. Its event's mark may trail
    // the confirm (the core's last step): until it lands, a duplicate republishes instead of
    // saying the job is finished, so it is waited for.
    wait_terminal_event_published(&m.mongo.db(), &m.manager, job_id).await;
    let before = m.manager.stored(job_id).await;
    m.world
        .submit_job(job_id, "src", "payments", &["memo", "id", "amount"])
        .await;
    worker
        .wait_for_lines(
            "the duplicate acknowledged",
            1,
            Duration::from_secs(30),
            |line| line.contains(&job_id.to_string()) && line.contains("Job already finished"),
        )
        .await;
    assert_eq!(m.manager.stored(job_id).await, before);

    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(30)).await, Some(0));
    m.cleanup().await;
}

#[tokio::test]
async fn a_failed_job_leaves_its_redacted_error_as_a_string_for_the_manager() {
    let m = ManagerWorld::new().await;
    let mut worker = m.start_worker().await;
    let mut events: Listener = m.world.listen().await;

    let (job_id, _) = m.submit("no_such_table", &["id"]).await;
    let message = m.world.failure_of(&mut events, job_id).await;
    assert!(message.contains("no_such_table"), "{message}");

    let stored = markers_cleared(&m.manager, job_id).await;
    let got = m.manager.get_job(job_id).await.expect("the Manager's GET");
    assert_eq!(got.status, "failed");
    let metadata = got.metadata.expect("metadata");
    let error = metadata
        .get_str("error")
        .expect("metadata.error is a string");
    assert!(error.contains("no_such_table"), "{error}");
    assert_eq!(stored.get("dedup_active"), Some(&Bson::Boolean(false)));
    assert_eq!(got.result_path, None);
    assert_eq!(got.result_hmac, None);

    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(30)).await, Some(0));
    m.cleanup().await;
}

#[tokio::test]
async fn a_job_naming_a_connection_the_manager_registered_reads_it_password_sealed() {
    use sqlx::postgres::PgConnectOptions;
    use std::str::FromStr as _;
    use testkit::manager::{NewConnection, Sealing};

    let m = ManagerWorld::new().await;
    m.manager.ensure_connection_indexes().await;
    // The world's source database, registered through the Manager under a name the
    // environment does not define, its password (if the server wants one) sealed.
    let source = PgConnectOptions::from_str(m.world.source_url()).expect("the source URL");
    let password = m
        .world
        .env(0)
        .get("DATASOURCE_SRC_PASSWORD")
        .cloned()
        .unwrap_or_default();
    let connection = NewConnection {
        username: source.get_username().to_owned(),
        password,
        ..NewConnection::postgres(
            "ledger",
            source.get_host(),
            source.get_port(),
            source.get_database().expect("a database"),
        )
    };
    let sealing = Sealing {
        key: m.world.keys.credentials(),
        version: "1",
    };
    m.manager
        .create_connection(&sealing, &connection)
        .await
        .expect("the Manager registers the connection");
    let mut worker = m.start_worker().await;
    let mut events: Listener = m.world.listen().await;

    let (job_id, _) = m.submit_on("ledger", "payments", &["id"]).await;
    let plaintext = m.world.completed_result(&mut events, job_id).await;
    let rows: serde_json::Value = serde_json::from_slice(&plaintext).expect("result JSON");
    assert_eq!(
        rows["ledger"]["payments"].as_array().map(Vec::len),
        Some(3),
        "{rows}"
    );
    let got = m.manager.get_job(job_id).await.expect("the Manager's GET");
    assert_eq!(got.status, "completed");

    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(30)).await, Some(0));
    m.cleanup().await;
}

#[tokio::test]
async fn a_message_for_a_job_the_manager_never_created_is_dead_lettered_and_nothing_inserted() {
    let m = ManagerWorld::new().await;
    let mut worker = m.start_worker().await;
    let mut dead = crate::harness::DeadLetters::tap(&m.world).await;

    let job_id = Uuid::now_v7();
    let body = m.world.job_body(job_id, "src", "payments", &["id"]);
    let t = chrono::Utc::now().timestamp();
    // Marked as this run's, so its dead letter is told apart on the shared exchange.
    let headers = signed(&m.world, t, &work_route(&m.world, ""), &body, None);
    publish(&m.world.broker.channel, "", &m.world.queue, &body, &headers).await;
    assert_eq!(
        dead.collect(1, Duration::from_secs(60)).await.len(),
        1,
        "{}",
        worker.output()
    );
    assert_eq!(m.manager.stored(job_id).await, None, "never inserted");
    let metrics = worker.get("/metrics").expect("metrics").1;
    assert!(metrics.contains("reason=\"job_not_found\""), "{metrics}");

    worker.signal("TERM");
    assert_eq!(worker.wait_exit(Duration::from_secs(30)).await, Some(0));
    m.cleanup().await;
}

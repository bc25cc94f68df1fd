//! The chaos soak in the Manager mode (issue 35): the scenario, checks and report of `mod.rs`,
//! with the replicas' state in the Manager's MongoDB — a private secantusdb of the test's own
//! (its own port and data, replica-set mode), each replica reaching it through its own fault
//! proxy — that is stopped once with SIGTERM and once with SIGKILL, and started again, instead
//! of PostgreSQL. Jobs are created by the Manager stand-in (`testkit::manager`) before their
//! messages are published. Beside the PostgreSQL soak's checks: the Manager's `GET` reads every
//! job, and every terminal document has `dedup_active` false and its markers cleared. A
//! missing or unexpected event is printed with its job's document, outbox rows and markers.
//!
//! The server runs with `--sync-on-commit`: secantusdb otherwise acknowledges a transaction's
//! commit before it is on disk, whatever the write concern asks, and a SIGKILL loses it, which
//! a MongoDB replica set's default (`w: majority`, journaled) never does
//! (`PrivateSecantus::start_durable`).
//!
//! `CHAOS_MANAGER=0` makes `scripts/chaos.sh` leave it out; the other knobs are the soak's.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::time::Duration;

use futures_util::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::{Client, Collection};
use testkit::manager::{Manager, NewJob, MARKER_KEYS};
use testkit::secantus::PrivateSecantus;
use uuid::Uuid;

use super::{Backend, Job, JobEnd, Kind, Summary};
use crate::harness::{FaultProxy, World};

/// One replica's way to the Manager's MongoDB.
pub(super) struct MongoLink {
    pub proxy: FaultProxy,
    name: String,
}

impl MongoLink {
    /// The Manager mode's settings in place of the state database's, as the chart sets them.
    pub fn env(&self, env: &mut BTreeMap<String, String>) {
        env.remove("DATABASE_URL");
        env.remove("DATABASE_MAX_CONNECTIONS");
        env.remove("API_PORT");
        for (name, value) in [
            ("MONGO_URI", "mongodb".to_owned()),
            ("MONGO_HOST", "127.0.0.1".to_owned()),
            ("MONGO_PORT", self.proxy.port().to_string()),
            ("MONGO_NAME", self.name.clone()),
            // The replica set advertises the server's own address; the driver must keep to
            // the proxy's.
            ("MONGO_PARAMETERS", "directConnection=true".to_owned()),
            ("MONGO_MAX_POOL_SIZE", "10".to_owned()),
            // The test server speaks no TLS.
            ("ALLOW_INSECURE_TLS", "true".to_owned()),
            // The repairer at its default pace, not the PostgreSQL soak's 2 s: here it is
            // lib-commons' dispatcher, whose retry of a failed row waits 5 minutes and whose
            // takeover of a stranded one 10 whatever the pace, and whose every pass reads
            // `distinct("tenant_id")` and the stuck rows over all of `streaming_outbox_events`
            // (published rows are kept): on the Python test server three replicas passing every
            // 2 s over a few thousand rows took most of its CPU, and the jobs waited in the
            // queue past their signature's freshness.
            ("OUTBOX_REPAIR_INTERVAL_SEC", "30".to_owned()),
            ("OUTBOX_REPAIR_GRACE_SEC", "10".to_owned()),
        ] {
            env.insert(name.to_owned(), value);
        }
    }
}

/// The Manager's side of the soak: its private server, its database and the stand-in.
pub(super) struct ManagerSide {
    server: std::sync::Arc<std::sync::Mutex<PrivateSecantus>>,
    port: u16,
    name: String,
    client: Client,
    manager: Manager,
}

impl ManagerSide {
    pub async fn start(world: &World) -> ManagerSide {
        let server = tokio::task::spawn_blocking(PrivateSecantus::start_durable)
            .await
            .expect("start the private secantusdb");
        let port = server.port;
        let mut options = mongodb::options::ClientOptions::parse(format!(
            "mongodb://127.0.0.1:{port}/?directConnection=true"
        ))
        .await
        .expect("the private server's URL");
        // Through the server's restarts the checks wait rather than fail.
        options.server_selection_timeout = Some(Duration::from_secs(60));
        let client = Client::with_options(options).expect("MongoDB client");
        let name = format!("fetcher_chaos_{}", world.id);
        let manager = Manager::new(client.database(&name));
        manager.ensure_indexes().await;
        ManagerSide {
            server: std::sync::Arc::new(std::sync::Mutex::new(server)),
            port,
            name,
            client,
            manager,
        }
    }

    pub async fn link(&self) -> MongoLink {
        MongoLink {
            proxy: FaultProxy::start(SocketAddr::from(([127, 0, 0, 1], self.port))).await,
            name: self.name.clone(),
        }
    }

    /// Stops the server (SIGKILL when `kill`, else SIGTERM), waits `outage`, starts it again.
    pub async fn restart(&self, kill: bool, outage: Duration) {
        let server = self.server.clone();
        tokio::task::spawn_blocking(move || {
            server
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .stop(if kill { "KILL" } else { "TERM" })
        })
        .await
        .expect("stop MongoDB");
        tokio::time::sleep(outage).await;
        let server = self.server.clone();
        tokio::task::spawn_blocking(move || {
            server.lock().unwrap_or_else(|e| e.into_inner()).resume()
        })
        .await
        .expect("start MongoDB");
    }

    /// Each job's document, as the Manager creates it for the request its message carries (a
    /// request of its own: the Manager refuses two active jobs of one request hash).
    pub async fn create_jobs(&self, jobs: &[Job]) {
        for job in jobs {
            let (connection, table, fields): (&str, &str, &[&str]) = match job.kind {
                Kind::Success | Kind::Slow => ("src", "payments", &["id", "amount", "memo"]),
                Kind::UnknownTable => ("src", "missing_table", &["id"]),
                Kind::UnknownConnection => ("nope", "payments", &["id"]),
                Kind::InvalidBody | Kind::Unparseable => ("src", "payments", &["id"]),
            };
            let fields: Vec<Bson> = fields.iter().map(|f| Bson::from(*f)).collect();
            let request = NewJob {
                mapped_fields: doc! {connection: {table: fields}},
                filters: Document::new(),
                metadata: doc! {"source": "chaos", "chaosJob": job.id.to_string()},
            };
            self.manager
                .create_job_as(job.id, &request)
                .await
                .expect("the Manager creates the job");
        }
    }

    async fn documents(&self, ids: &[Uuid]) -> Vec<Document> {
        self.projected(ids, None).await
    }

    /// The documents of `ids`, only `projection`'s fields when given. The database is the
    /// soak's own, so every document is read and those of `ids` kept: the test server matches
    /// an `_id: {$in: [...]}` of 2,000 ids against every document in turn, seconds of its CPU
    /// that the replicas then lack.
    async fn projected(&self, ids: &[Uuid], projection: Option<Document>) -> Vec<Document> {
        let wanted: HashSet<Uuid> = ids.iter().copied().collect();
        let mut options = mongodb::options::FindOptions::default();
        options.projection = projection;
        let all: Vec<Document> = self
            .manager
            .jobs()
            .find(doc! {})
            .with_options(options)
            .await
            .expect("find the jobs")
            .try_collect()
            .await
            .expect("read the jobs");
        all.into_iter()
            .filter(|d| match d.get("_id") {
                Some(Bson::Binary(b)) => {
                    Uuid::from_slice(&b.bytes).is_ok_and(|id| wanted.contains(&id))
                }
                _ => false,
            })
            .collect()
    }

    /// Every job's end as the Manager's documents hold it.
    pub async fn states(&self, ids: &[Uuid]) -> HashMap<Uuid, JobEnd> {
        let fields = doc! {"status": 1, "result_path": 1, "result_hmac": 1};
        self.projected(ids, Some(fields))
            .await
            .into_iter()
            .filter_map(|d| {
                let id = match d.get("_id") {
                    Some(Bson::Binary(b)) => Uuid::from_slice(&b.bytes).ok()?,
                    _ => return None,
                };
                let text = |field: &str| d.get_str(field).ok().map(str::to_owned);
                Some((
                    id,
                    JobEnd {
                        status: text("status").unwrap_or_default().trim().to_lowercase(),
                        path: text("result_path").filter(|p| !p.is_empty()),
                        hmac: text("result_hmac").filter(|h| !h.is_empty()),
                        before: None,
                    },
                ))
            })
            .collect()
    }

    /// The distinct `metadata.error`s of `ids`.
    pub async fn errors(&self, ids: &[Uuid]) -> Vec<String> {
        let errors: HashSet<String> = self
            .documents(ids)
            .await
            .iter()
            .map(|d| {
                d.get_document("metadata")
                    .ok()
                    .and_then(|m| m.get_str("error").ok())
                    .unwrap_or("")
                    .to_owned()
            })
            .collect();
        errors.into_iter().collect()
    }

    /// The Manager's rows: its `GET` reads every job; every terminal document has
    /// `dedup_active` false and no marker left.
    pub async fn checks(&self, s: &mut Summary, states: &HashMap<Uuid, JobEnd>) {
        let ids: Vec<Uuid> = states.keys().copied().collect();
        let mut unreadable = 0;
        for id in &ids {
            if let Err(e) = self.manager.get_job(*id).await {
                eprintln!("[chaos] the Manager's GET of {id}: {e:?}");
                unreadable += 1;
            }
        }
        s.must("jobs the Manager's GET cannot read", unreadable, 0);
        let mut dedup = 0;
        let mut markers = 0;
        for d in self.documents(&ids).await {
            let status = d.get_str("status").unwrap_or("");
            if !matches!(status, "completed" | "failed") {
                continue;
            }
            if d.get("dedup_active") != Some(&Bson::Boolean(false)) {
                eprintln!("[chaos] dedup_active not false: {d}");
                dedup += 1;
            }
            let metadata = d.get_document("metadata").cloned().unwrap_or_default();
            if MARKER_KEYS.iter().any(|k| metadata.contains_key(*k)) {
                eprintln!("[chaos] markers left: {d}");
                markers += 1;
            }
        }
        s.must("terminal jobs whose dedup_active is not false", dedup, 0);
        s.must("terminal jobs whose markers are left", markers, 0);
    }

    /// A ce-id's job: its document (markers included), and its rows in lib-streaming's outbox
    /// (`streaming_outbox_events`) and this Worker's (`fetcher_worker_outbox`).
    pub async fn explain(&self, ce_id: &str) -> String {
        let Some(id) = ce_id
            .rsplit('.')
            .next()
            .and_then(|id| id.parse::<Uuid>().ok())
        else {
            return "no job id in the ce-id".to_owned();
        };
        let store = mongostate::Store::new(self.client.clone(), &self.name);
        let document = self.manager.stored(id).await;
        let markers = document
            .as_ref()
            .and_then(|d| d.get_document("metadata").ok())
            .map(|m| {
                MARKER_KEYS
                    .iter()
                    .filter_map(|k| m.get(*k).map(|v| format!("{k}={v}")))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let streaming = rows_naming(&store.outbox_rows(), id).await;
        let worker = rows_naming(&store.worker_rows(), id).await;
        format!(
            "document {document:?}; markers {markers:?}; streaming_outbox_events {streaming:?}; \
             fetcher_worker_outbox {worker:?}"
        )
    }
}

/// The rows of `collection` that name `id` anywhere (ids, ce-ids, payloads).
async fn rows_naming(collection: &Collection<Document>, id: Uuid) -> Vec<String> {
    let Ok(cursor) = collection.find(doc! {}).await else {
        return vec!["<unreadable>".to_owned()];
    };
    let rows: Vec<Document> = cursor.try_collect().await.unwrap_or_default();
    let needle = id.to_string();
    rows.into_iter()
        .map(|row| Bson::Document(row).into_relaxed_extjson().to_string())
        .filter(|json| json.contains(&needle))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long chaos soak: run with `make chaos`"]
async fn soak_under_faults_in_the_manager_mode() {
    super::soak(|world| async move { Backend::Manager(ManagerSide::start(&world).await) }).await;
}

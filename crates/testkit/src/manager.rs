//! A stand-in for the Go Manager of a Fetcher deployment (issue 35), written from
//! docs/UPSTREAM-MANAGER.md, not from upstream's code: it creates the `job`
//! collection's indexes and documents as the Manager does, and reads a job back as the
//! Manager's `GET /v1/fetcher/{id}` does, refusing what Go would refuse; and it registers
//! `connection` documents as the Manager does, password sealed. The signed message is the
//! tests' own, on top of this.

use mongodb::bson::{doc, spec::BinarySubtype, Binary, Bson, DateTime, Document};
use mongodb::options::IndexOptions;
use mongodb::{Collection, Database, IndexModel};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The statuses Go's `NewJobStatusFromString` accepts (after trimming and lower-casing).
pub const MANAGER_STATUSES: [&str; 4] = ["pending", "processing", "completed", "failed"];

/// The three marker keys the Go Worker writes under `metadata` with a terminal status and the
/// Manager's `GET` hides.
pub const MARKER_KEYS: [&str; 3] = [
    "terminalEventPending",
    "terminalEventStatus",
    "terminalEventPayload",
];

/// The Manager's view of one database (`lower(MONGO_NAME)`).
pub struct Manager {
    pub db: Database,
}

/// A job as a client asks the Manager for it (`POST /v1/fetcher`).
#[derive(Clone, Debug, Default)]
pub struct NewJob {
    /// `{datasource: {table: [fields]}}`.
    pub mapped_fields: Document,
    /// `{datasource: {table: {field: {op: values}}}}`, or empty.
    pub filters: Document,
    /// The request's metadata, or empty.
    pub metadata: Document,
}

/// A job as the Manager's `GET` reads it back, and the stored document it came from.
#[derive(Debug)]
pub struct ManagerJob {
    pub id: Uuid,
    pub status: String,
    /// `metadata` without the marker keys (`None` when nothing is left, as the Manager omits it).
    pub metadata: Option<Document>,
    pub result_path: Option<String>,
    pub result_hmac: Option<String>,
    pub completed_at: Option<DateTime>,
    pub stored: Document,
}

/// Why the Manager's `GET` would not answer 200.
#[derive(Debug, PartialEq, Eq)]
pub enum GetError {
    /// FET-1001.
    NotFound,
    /// HTTP 500: Go cannot decode the document (`why`).
    Internal(String),
}

impl Manager {
    pub fn new(db: Database) -> Manager {
        Manager { db }
    }

    pub fn jobs(&self) -> Collection<Document> {
        self.db.collection("job")
    }

    pub fn connections(&self) -> Collection<Document> {
        self.db.collection("connection")
    }

    /// The job indexes the Manager creates at start (single-tenant), with their exact options.
    pub async fn ensure_indexes(&self) {
        let index = |keys: Document, name: &str, partial: Option<Document>, unique: bool| {
            let mut options = IndexOptions::builder().name(name.to_owned()).build();
            options.partial_filter_expression = partial;
            if unique {
                options.unique = Some(true);
            }
            IndexModel::builder().keys(keys).options(options).build()
        };
        let models = vec![
            index(doc! {"status": 1}, "idx_job_status", None, false),
            index(
                doc! {"status": 1, "created_at": -1},
                "idx_job_status_created",
                Some(doc! {"status": "processing"}),
                false,
            ),
            index(doc! {"created_at": -1}, "idx_job_created", None, false),
            index(doc! {"completed_at": -1}, "idx_job_completed", None, false),
            index(
                doc! {"status": 1, "completed_at": -1},
                "idx_job_status_completed",
                Some(doc! {"status": "completed"}),
                false,
            ),
            index(
                doc! {"request_hash": 1, "created_at": -1},
                "idx_job_hash_created",
                None,
                false,
            ),
            index(
                doc! {"metadata.terminalEventPending": 1, "status": 1, "completed_at": 1, "created_at": 1},
                "idx_job_terminal_event_repair",
                Some(doc! {"metadata.terminalEventPending": true}),
                false,
            ),
            index(
                doc! {"request_hash": 1},
                "uniq_job_hash_active",
                Some(doc! {"dedup_active": true}),
                true,
            ),
        ];
        self.jobs()
            .create_indexes(models)
            .await
            .expect("create the Manager's job indexes");
    }

    /// Inserts a new job as the Manager does (`InsertOne`, status `pending`, `dedup_active`
    /// true, a UUIDv7 `_id` of binary subtype 0). Fails as the Manager's insert does on a
    /// duplicate active `request_hash` (the `Err` is the driver's).
    pub async fn create_job(&self, job: &NewJob) -> Result<Uuid, mongodb::error::Error> {
        self.create_job_as(Uuid::now_v7(), job).await
    }

    /// [`create_job`](Self::create_job) with the `_id` chosen by the test (a UUIDv7, as the
    /// Manager's): for a test that builds its messages before the Manager's documents.
    pub async fn create_job_as(
        &self,
        id: Uuid,
        job: &NewJob,
    ) -> Result<Uuid, mongodb::error::Error> {
        let mut document = doc! { "_id": id_bson(id) };
        if !job.metadata.is_empty() {
            document.insert("metadata", job.metadata.clone());
        }
        document.insert("mapped_fields", job.mapped_fields.clone());
        if !job.filters.is_empty() {
            document.insert("filters", job.filters.clone());
        }
        document.insert("status", "pending");
        document.insert("dedup_active", true);
        document.insert("request_hash", request_hash(job));
        document.insert("created_at", DateTime::now());
        document.insert("completed_at", Bson::Null);
        self.jobs().insert_one(document).await?;
        Ok(id)
    }

    /// The stored document, as it is.
    pub async fn stored(&self, id: Uuid) -> Option<Document> {
        self.jobs()
            .find_one(doc! {"_id": id_bson(id)})
            .await
            .expect("find the job")
    }

    /// The job as the Manager's `GET /v1/fetcher/{id}` reads it: found by its subtype-0 `_id`
    /// only, decoded as Go decodes it (`JobMongoDBModel` then `ToEntity`).
    pub async fn get_job(&self, id: Uuid) -> Result<ManagerJob, GetError> {
        let stored = self.stored(id).await.ok_or(GetError::NotFound)?;
        decode(id, stored).map_err(GetError::Internal)
    }
}

/// The `_id` as Go's driver writes a `uuid.UUID`.
pub fn id_bson(id: Uuid) -> Bson {
    Bson::Binary(Binary {
        subtype: BinarySubtype::Generic,
        bytes: id.as_bytes().to_vec(),
    })
}

/// The 64 lower-case hex digits of SHA-256 over the request (the Manager hashes Go's JSON of
/// `{"dataRequest":…,"metadata":…}`; the stand-in hashes the documents' relaxed extended JSON,
/// which is equally a function of the request).
pub fn request_hash(job: &NewJob) -> String {
    let request = doc! {
        "dataRequest": {"mappedFields": job.mapped_fields.clone(), "filters": job.filters.clone()},
        "metadata": job.metadata.clone(),
    };
    let json = Bson::Document(request).into_relaxed_extjson().to_string();
    Sha256::digest(json.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What Go's decoder and `ToEntity` accept, field by field (UPSTREAM-MANAGER §1.2, §2.1).
fn decode(id: Uuid, stored: Document) -> Result<ManagerJob, String> {
    match stored.get("_id") {
        Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Generic && b.bytes.len() == 16 => {}
        other => {
            return Err(format!(
                "_id is not a 16-byte binary of subtype 0: {other:?}"
            ))
        }
    }
    let status = match stored.get("status") {
        Some(Bson::String(s)) => s.trim().to_lowercase(),
        other => return Err(format!("status is not a string: {other:?}")),
    };
    if !MANAGER_STATUSES.contains(&status.as_str()) {
        return Err(format!("invalid job status {status:?}"));
    }
    match stored.get("dedup_active") {
        Some(Bson::Boolean(_)) | None => {}
        other => return Err(format!("dedup_active is not a bool: {other:?}")),
    }
    let text = |field: &str| match stored.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::String(s)) if s.is_empty() => Ok(None),
        Some(Bson::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("{field} is not a string: {other:?}")),
    };
    let result_path = text("result_path")?;
    let result_hmac = text("result_hmac")?;
    let completed_at = match stored.get("completed_at") {
        None | Some(Bson::Null) => None,
        Some(Bson::DateTime(at)) => Some(*at),
        Some(other) => return Err(format!("completed_at is not a datetime: {other:?}")),
    };
    let metadata = match stored.get("metadata") {
        None | Some(Bson::Null) => None,
        Some(Bson::Document(m)) => {
            let mut shown = m.clone();
            for key in MARKER_KEYS {
                shown.remove(key);
            }
            (!shown.is_empty()).then_some(shown)
        }
        Some(other) => return Err(format!("metadata is not a document: {other:?}")),
    };
    Ok(ManagerJob {
        id,
        status,
        metadata,
        result_path,
        result_hmac,
        completed_at,
        stored,
    })
}

/// A connection as a client registers it with the Manager (`POST /v1/connections`).
#[derive(Clone, Debug)]
pub struct NewConnection {
    pub config_name: String,
    /// `POSTGRESQL`, `MYSQL`, `MONGODB`, `SQL_SERVER` or `ORACLE`.
    pub kind: String,
    pub host: String,
    pub port: i32,
    pub database_name: String,
    pub schema: Option<String>,
    pub username: String,
    /// Plain text; empty for none. The stand-in seals it.
    pub password: String,
    /// `ssl.mode`; `None` leaves `ssl` out.
    pub ssl_mode: Option<String>,
    /// Empty leaves `metadata` out.
    pub metadata: Document,
}

impl NewConnection {
    /// A PostgreSQL connection named `config_name` with a password, no TLS settings.
    pub fn postgres(config_name: &str, host: &str, port: u16, database: &str) -> NewConnection {
        NewConnection {
            config_name: config_name.to_owned(),
            kind: "POSTGRESQL".to_owned(),
            host: host.to_owned(),
            port: i32::from(port),
            database_name: database.to_owned(),
            schema: None,
            username: "reader".to_owned(),
            password: String::new(),
            ssl_mode: None,
            metadata: Document::new(),
        }
    }
}

/// The Manager's key for passwords: `HKDF(APP_ENC_KEY, "fetcher-credentials-v1")` and its
/// `APP_ENC_KEY_VERSION`.
pub struct Sealing<'a> {
    pub key: &'a crypto::CipherKey,
    pub version: &'a str,
}

impl Manager {
    /// The `connection` indexes the Manager creates at start (single-tenant), with their exact
    /// options (UPSTREAM-MANAGER §3.1).
    pub async fn ensure_connection_indexes(&self) {
        let live = doc! {"deleted_at": Bson::Null};
        let index = |keys: Document, name: &str, unique: bool| {
            let mut options = IndexOptions::builder().name(name.to_owned()).build();
            options.partial_filter_expression = Some(live.clone());
            if unique {
                options.unique = Some(true);
            }
            IndexModel::builder().keys(keys).options(options).build()
        };
        let models = vec![
            index(doc! {"config_name": 1}, "idx_connection_config_name", true),
            index(doc! {"created_at": -1}, "idx_connection_created", false),
            index(
                doc! {"database_name": 1},
                "idx_connection_database_name",
                false,
            ),
        ];
        self.connections()
            .create_indexes(models)
            .await
            .expect("create the Manager's connection indexes");
    }

    /// Registers a connection as the Manager does (`InsertOne`, a UUIDv7 `_id` of binary
    /// subtype 0, `deleted_at` null): the password sealed with AES-256-GCM under `sealing.key`
    /// as base64 of nonce‖ciphertext‖tag and labelled with `sealing.version`; no password is
    /// `""` in both fields (§3.1, §3.2). A live connection of the same name fails as the
    /// Manager's unique index makes it fail (the `Err` is the driver's).
    pub async fn create_connection(
        &self,
        sealing: &Sealing<'_>,
        new: &NewConnection,
    ) -> Result<Uuid, mongodb::error::Error> {
        let id = Uuid::now_v7();
        let (sealed, version) = if new.password.is_empty() {
            (String::new(), String::new())
        } else {
            (
                sealing.key.seal(new.password.as_bytes()),
                sealing.version.to_owned(),
            )
        };
        let now = DateTime::now();
        let mut document = doc! {
            "_id": id_bson(id),
            "product_name": "fetcher-tests",
            "config_name": &new.config_name,
            "type": &new.kind,
            "host": &new.host,
            "port": new.port,
            "database_name": &new.database_name,
        };
        if let Some(schema) = &new.schema {
            document.insert("schema", schema);
        }
        document.insert("username", &new.username);
        document.insert("password_encrypted", sealed);
        document.insert("encryption_key_version", version);
        if let Some(mode) = &new.ssl_mode {
            document.insert("ssl", doc! {"mode": mode});
        }
        if !new.metadata.is_empty() {
            document.insert("metadata", new.metadata.clone());
        }
        document.insert("created_at", now);
        document.insert("updated_at", now);
        document.insert("deleted_at", Bson::Null);
        self.connections().insert_one(document).await?;
        Ok(id)
    }

    /// Soft-deletes the live connection named `config_name` as the Manager's `DELETE` does
    /// (`deleted_at` set); `false` when there was none.
    pub async fn delete_connection(&self, config_name: &str) -> bool {
        let now = DateTime::now();
        let done = self
            .connections()
            .update_one(
                doc! {"config_name": config_name, "deleted_at": Bson::Null},
                doc! {"$set": {"deleted_at": now, "updated_at": now}},
            )
            .await
            .expect("soft-delete the connection");
        done.modified_count == 1
    }
}

impl Manager {
    /// A Go Worker that made its terminal write (UPSTREAM-MANAGER §1.4 step 5: `status`,
    /// `dedup_active` false, `completed_at` and the three markers, all dotted `$set`s) and died
    /// before its outbox row was written: the marker stays for a repairer. `marker_status` may
    /// differ from `status` to leave a marker Go's repairer refuses.
    pub async fn crashed_go_worker(
        &self,
        id: Uuid,
        status: &str,
        marker_status: &str,
        payload: &str,
    ) {
        let done = self
            .jobs()
            .update_one(
                doc! {"_id": id_bson(id)},
                doc! {"$set": {
                    "status": status,
                    "dedup_active": false,
                    "completed_at": DateTime::now(),
                    "metadata.terminalEventPending": true,
                    "metadata.terminalEventStatus": marker_status,
                    "metadata.terminalEventPayload": payload,
                }},
            )
            .await
            .expect("the Go Worker's terminal write");
        assert_eq!(done.matched_count, 1, "no job {id} to end");
    }
}

/// A row exactly as lib-streaming v1.6.2's `Create` writes one for a Go Worker's `job.failed`
/// (UPSTREAM-MANAGER §4.2 fields and BSON types, §4.3 envelope, compact, in Go's member order):
/// `body` published to `exchange`, its event emitted at `timestamp` by `source`. Its `id`, and
/// the row, `PENDING`.
pub fn lib_streaming_row(
    job_id: Uuid,
    body: &str,
    exchange: &str,
    timestamp: &str,
    source: &str,
) -> (String, Document) {
    let id = Uuid::now_v7().to_string();
    let payload = format!(
        concat!(
            r#"{{"version":1,"route_key":"job.failed.rabbitmq","definition_key":"job.failed","#,
            r#""target":"fetcher-job-events-rabbitmq","transport":"rabbitmq","#,
            r#""destination":{{"kind":"rabbitmq","name":"{exchange}","address":"job.failed"}},"#,
            r#""aggregate_id":"ad9466d1-c6f9-5be3-98e4-bfc3b1341269","requirement":"required","#,
            r#""policy":{{"enabled":true,"direct":"skip","outbox":"always","dlq":"on_routable_failure"}},"#,
            r#""event":{{"TenantID":"single-tenant","ResourceType":"job","EventType":"failed","#,
            r#""EventID":"fetcher.job.failed.{job}","SchemaVersion":"1.0.0","#,
            r#""Timestamp":"{timestamp}","Source":"{source}","#,
            r#""Subject":"{job}","DataContentType":"application/json","DataSchema":"","#,
            r#""SystemEvent":false,"Payload":{body}}}}}"#,
        ),
        exchange = exchange,
        job = job_id,
        body = body,
        timestamp = timestamp,
        source = source,
    );
    let now = DateTime::now();
    let row = doc! {
        "id": &id,
        "event_type": "lerian.streaming.publish",
        "aggregate_id": "ad9466d1-c6f9-5be3-98e4-bfc3b1341269",
        "payload": payload,
        "status": "PENDING",
        "attempts": 0_i32,
        "created_at": now,
        "updated_at": now,
        "tenant_id": "single-tenant",
    };
    (id, row)
}

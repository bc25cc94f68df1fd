//! MongoDB integration-test helpers: a fresh database per test on the local test server, and
//! an [`Engine`] whose datasources are MongoDB databases.
//!
//! The server is `TEST_MONGO_URL`, default `mongodb://127.0.0.1:27017` (secantusdb, which
//! `scripts/services.sh mongodb` starts; docs/TEST-SERVERS.md says what it implements). A server
//! that cannot be reached fails the test with a message saying so.

use std::time::Duration;

use engine::connection::{from_env_vars, Resolver};
use engine::{Engine, EngineConfig};
use mongodb::bson::{doc, Document};
use mongodb::options::ClientOptions;
use mongodb::{Client, Database};
use uuid::Uuid;

/// The server used when `TEST_MONGO_URL` is unset.
pub const DEFAULT_MONGO_URL: &str = "mongodb://127.0.0.1:27017";

pub fn mongo_url() -> String {
    std::env::var("TEST_MONGO_URL").unwrap_or_else(|_| DEFAULT_MONGO_URL.to_owned())
}

/// A database created for one test, named `fetcher_test_<uuid>`; [`MongoDb::drop`] removes it.
/// A test that panics first never gets there: then `Drop` removes it on a thread of its own.
pub struct MongoDb {
    pub name: String,
    pub client: Client,
    host: String,
    port: u16,
    dropped: bool,
}

impl MongoDb {
    pub async fn create() -> MongoDb {
        let url = mongo_url();
        let mut options = ClientOptions::parse(&url)
            .await
            .unwrap_or_else(|e| panic!("TEST_MONGO_URL is not a MongoDB URL: {e}"));
        options.server_selection_timeout = Some(Duration::from_secs(10));
        let (host, port) = match &options.hosts[0] {
            mongodb::options::ServerAddress::Tcp { host, port } => {
                (host.clone(), port.unwrap_or(27017))
            }
            other => panic!("TEST_MONGO_URL must name a TCP server, not {other}"),
        };
        let client = Client::with_options(options).expect("client");
        client
            .database("admin")
            .run_command(doc! { "ping": 1 })
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "the MongoDB test server at {url} cannot be reached (start it with \
                     `bash scripts/services.sh mongodb`): {e}"
                )
            });
        MongoDb {
            name: format!("fetcher_test_{}", Uuid::new_v4().simple()),
            client,
            host,
            port,
            dropped: false,
        }
    }

    pub fn db(&self) -> Database {
        self.client.database(&self.name)
    }

    /// Inserts `documents` into `collection`.
    pub async fn insert(&self, collection: &str, documents: Vec<Document>) {
        self.db()
            .collection::<Document>(collection)
            .insert_many(documents)
            .await
            .expect("insert");
    }

    /// The `DATASOURCE_<group>_*` variables of a datasource named `name` on this database.
    pub fn vars(&self, group: &str, name: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let prefix = format!("DATASOURCE_{group}_");
        let mut vars: Vec<(String, String)> = [
            ("CONFIG_NAME", name.to_owned()),
            ("TYPE", "MONGODB".to_owned()),
            ("HOST", self.host.clone()),
            ("PORT", self.port.to_string()),
            ("DATABASE", self.name.clone()),
            ("USER", String::new()),
            ("SSLMODE", "disable".to_owned()),
        ]
        .into_iter()
        .map(|(suffix, value)| (format!("{prefix}{suffix}"), value))
        .collect();
        for (suffix, value) in extra {
            vars.push((format!("{prefix}{suffix}"), (*value).to_owned()));
        }
        vars
    }

    /// An engine whose one datasource, `name`, is this database.
    pub fn engine(&self, name: &str, config: EngineConfig, extra: &[(&str, &str)]) -> Engine {
        let env = from_env_vars(self.vars("MONGO0", name, extra)).expect("valid datasource");
        Engine::new(config, Resolver::new(env, None))
    }

    /// The server's open cursors on this database's `collection` (`currentOp`'s idle cursors).
    pub async fn open_cursors(&self, collection: &str) -> usize {
        let ns = format!("{}.{collection}", self.name);
        let reply = self
            .client
            .database("admin")
            .run_command(doc! { "currentOp": 1, "idleCursors": true })
            .await
            .expect("currentOp");
        reply
            .get_array("inprog")
            .map(|ops| {
                ops.iter()
                    .filter_map(|op| op.as_document())
                    .filter(|op| op.get_str("type").ok() == Some("idleCursor"))
                    .filter(|op| op.get_str("ns").ok() == Some(ns.as_str()))
                    .count()
            })
            .unwrap_or(0)
    }

    pub async fn drop(mut self) {
        self.db().drop().await.expect("drop the test database");
        self.dropped = true;
    }
}

impl Drop for MongoDb {
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        // The test panicked before `drop().await`: a client of the cleanup's own runtime.
        let name = self.name.clone();
        testkit::cleanup::run_detached(move || async move {
            if let Ok(options) = ClientOptions::parse(mongo_url()).await {
                if let Ok(client) = Client::with_options(options) {
                    let _ = client.database(&name).drop().await;
                }
            }
        });
    }
}

//! [`MongoDb`]: a database of the test's own on the MongoDB test server (`TEST_MONGO_URL`,
//! default `mongodb://127.0.0.1:27017`: secantusdb, which `scripts/services.sh mongodb` starts;
//! docs/TEST-SERVERS.md says what it implements), its `DATASOURCE_<GROUP>_*` variables, and the
//! server's open cursors on it. A server that cannot be reached fails the test saying so.

use std::net::SocketAddr;
use std::time::Duration;

use mongodb::bson::{doc, Document};
use mongodb::options::{ClientOptions, ServerAddress};
use mongodb::{Client, Database};
use uuid::Uuid;

/// The server used when `TEST_MONGO_URL` is unset.
const DEFAULT_MONGO_URL: &str = "mongodb://127.0.0.1:27017";

fn mongo_url() -> String {
    std::env::var("TEST_MONGO_URL").unwrap_or_else(|_| DEFAULT_MONGO_URL.to_owned())
}

/// A database named `fetcher_test_<uuid>`; [`MongoDb::drop`] removes it, or `Drop` (on a thread
/// of its own) when the test panicked first.
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
            ServerAddress::Tcp { host, port } => (host.clone(), port.unwrap_or(27017)),
            other => panic!("TEST_MONGO_URL must name a TCP server, not {other}"),
        };
        let client = Client::with_options(options).expect("MongoDB client");
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

    /// The server's host and port, as `TEST_MONGO_URL` names them.
    pub fn host_port(&self) -> (&str, u16) {
        (&self.host, self.port)
    }

    /// The server's address, for a proxy in front of it.
    pub async fn addr(&self) -> SocketAddr {
        tokio::net::lookup_host((self.host.as_str(), self.port))
            .await
            .expect("the MongoDB test server's address")
            .next()
            .expect("an address")
    }

    /// Inserts `documents` into `collection`, in order.
    pub async fn insert(&self, collection: &str, documents: Vec<Document>) {
        self.db()
            .collection::<Document>(collection)
            .insert_many(documents)
            .await
            .expect("insert");
    }

    /// The `DATASOURCE_<group>_*` variables of a datasource named `name` on this database, then
    /// `extra` (`(suffix, value)`, overriding nothing: a later variable of the same name wins).
    pub fn vars(&self, group: &str, name: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let prefix = format!("DATASOURCE_{group}_");
        let settings = [
            ("CONFIG_NAME", name.to_owned()),
            ("TYPE", "MONGODB".to_owned()),
            ("HOST", self.host.clone()),
            ("PORT", self.port.to_string()),
            ("DATABASE", self.name.clone()),
            ("USER", String::new()),
            ("SSLMODE", "disable".to_owned()),
        ];
        settings
            .into_iter()
            .chain(extra.iter().map(|(k, v)| (*k, (*v).to_owned())))
            .map(|(suffix, value)| (format!("{prefix}{suffix}"), value))
            .collect()
    }

    /// The server's open cursors on `collection` of this database (`currentOp`'s idle cursors;
    /// secantusdb ignores `currentOp`'s filter arguments, so they are filtered here).
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
        let name = self.name.clone();
        crate::cleanup::run_detached(move || async move {
            if let Ok(options) = ClientOptions::parse(mongo_url()).await {
                if let Ok(client) = Client::with_options(options) {
                    let _ = client.database(&name).drop().await;
                }
            }
        });
    }
}

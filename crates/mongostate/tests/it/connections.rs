//! `connections`: documents the Manager stand-in registers, found and opened as the Go Worker
//! finds and opens them.

use std::collections::BTreeMap;

use crypto::KeySet;
use engine::connection::{ConnectionConfig, DatasourceKind, SslMode};
use engine::EngineError;
use mongodb::bson::doc;
use mongostate::connections::{self, Credentials};
use mongostate::Store;
use testkit::manager::{Manager, NewConnection, Sealing};
use testkit::mongo::MongoDb;

const PASSWORD: &str = "p@ss word-sentinel";

/// The repository's known-answer vectors (`tests/vectors`).
fn vectors(file: &str) -> serde_json::Value {
    let path = format!("{}/../../tests/vectors/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    serde_json::from_str(&text).expect("JSON")
}

/// The key set of the vectors' first master key, which the Manager and the Worker share.
fn keys() -> KeySet {
    let master = vectors("keys.json")["masters"][0]["APP_ENC_KEY"]
        .as_str()
        .expect("masters[0]")
        .to_owned();
    KeySet::from_base64(&master).expect("a valid master key")
}

/// A private database with the Manager's connection indexes, and the Worker's view of it.
struct World {
    db: MongoDb,
    manager: Manager,
    store: Store,
    keys: KeySet,
}

impl World {
    async fn new() -> World {
        let db = MongoDb::create().await;
        let manager = Manager::new(db.db());
        manager.ensure_connection_indexes().await;
        let store = Store::new(db.client.clone(), &db.name);
        World {
            db,
            manager,
            store,
            keys: keys(),
        }
    }

    /// The Worker's credentials at `APP_ENC_KEY_VERSION=version`.
    fn credentials(&self, version: &str) -> Credentials {
        Credentials::new(self.keys.credentials().clone(), version)
    }

    /// Registers `connection` as a Manager at `APP_ENC_KEY_VERSION=version` does.
    async fn register(&self, connection: &NewConnection, version: &str) {
        let sealing = Sealing {
            key: self.keys.credentials(),
            version,
        };
        self.manager
            .create_connection(&sealing, connection)
            .await
            .expect("the Manager registers the connection");
    }

    async fn find(
        &self,
        names: &[&str],
    ) -> Result<Vec<connections::ManagerConnection>, EngineError> {
        connections::find(&self.store, &self.credentials("1"), names).await
    }
}

fn orders() -> NewConnection {
    NewConnection {
        password: PASSWORD.to_owned(),
        ..NewConnection::postgres("orders", "orders-db.internal", 5433, "orders")
    }
}

#[tokio::test]
async fn a_live_connection_is_found_and_its_password_opened() {
    let world = World::new().await;
    world.register(&orders(), "1").await;
    world
        .register(&NewConnection::postgres("other", "h", 5432, "d"), "1")
        .await;

    let found = world.find(&[" orders ", ""]).await.expect("found");
    assert_eq!(found.len(), 1, "{found:?}");
    let connection = &found[0];
    assert_eq!(connection.config_name, "orders");
    assert_eq!(connection.password.expose(), PASSWORD);
    assert_eq!(connection.key_version, "1");

    let config = connection.to_config().expect("a usable connection");
    assert_eq!(config.name, "orders");
    assert_eq!(config.kind, DatasourceKind::Postgres);
    assert_eq!(
        (config.host.as_str(), config.port, config.database.as_str()),
        ("orders-db.internal", 5433, "orders")
    );
    assert_eq!(config.user, "reader");
    assert_eq!(config.password.expose(), PASSWORD);
    assert_eq!(
        config.ssl_mode,
        SslMode::Disable,
        "no ssl is no TLS, as upstream"
    );
    assert!(!format!("{found:?} {config:?}").contains(PASSWORD));
    world.db.drop().await;
}

#[tokio::test]
async fn a_deleted_connection_is_not_found_and_its_name_reads_as_removed() {
    let world = World::new().await;
    world.register(&orders(), "1").await;
    assert!(world.manager.delete_connection("orders").await);

    assert!(world.find(&["orders"]).await.expect("read").is_empty());
    assert!(connections::is_removed(&world.store, "orders")
        .await
        .unwrap());
    let error = connections::resolve(
        &world.store,
        &world.credentials("1"),
        &BTreeMap::new(),
        &["orders"],
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, EngineError::RemovedConnection(_)),
        "{error}"
    );

    // The Manager's partial unique index lets the name be registered again; the live one is
    // the one found.
    let again = NewConnection {
        host: "orders-v2.internal".to_owned(),
        ..orders()
    };
    world.register(&again, "1").await;
    let found = world.find(&["orders"]).await.expect("read");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].host, "orders-v2.internal");
    world.db.drop().await;
}

#[tokio::test]
async fn a_password_sealed_under_another_key_version_is_an_error_naming_the_connection() {
    let world = World::new().await;
    world.register(&orders(), "2").await;

    let error = world.find(&["orders"]).await.unwrap_err();
    match &error {
        EngineError::KeyVersionMismatch {
            connection,
            found,
            expected,
        } => assert_eq!(
            (connection.as_str(), found.as_str(), expected.as_str()),
            ("orders", "2", "1")
        ),
        other => panic!("{other:?}"),
    }
    let text = error.to_string();
    assert!(text.contains("orders"), "{text}");
    assert!(!text.contains(PASSWORD), "{text}");

    let at_two = connections::find(&world.store, &world.credentials("2"), &["orders"])
        .await
        .expect("the Worker at version 2 opens it");
    assert_eq!(at_two[0].password.expose(), PASSWORD);
    world.db.drop().await;
}

#[tokio::test]
async fn a_tampered_or_foreign_ciphertext_is_an_error_without_the_text() {
    let world = World::new().await;
    world.register(&orders(), "1").await;
    let stored = world
        .manager
        .connections()
        .find_one(doc! {"config_name": "orders"})
        .await
        .unwrap()
        .expect("stored");
    let sealed = stored.get_str("password_encrypted").unwrap().to_owned();
    // One base64 digit of the ciphertext changed: still base64, no longer authentic.
    let mut tampered: Vec<char> = sealed.chars().collect();
    tampered[20] = if tampered[20] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();
    world
        .manager
        .connections()
        .update_one(
            doc! {"config_name": "orders"},
            doc! {"$set": {"password_encrypted": &tampered}},
        )
        .await
        .unwrap();

    let error = world.find(&["orders"]).await.unwrap_err();
    assert!(
        matches!(&error, EngineError::PasswordUnreadable { connection } if connection == "orders"),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        !text.contains(&tampered) && !text.contains(PASSWORD),
        "{text}"
    );

    // Authentic, but sealed by a Manager with another APP_ENC_KEY.
    let foreign = KeySet::from_base64("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=").unwrap();
    world
        .manager
        .connections()
        .update_one(
            doc! {"config_name": "orders"},
            doc! {"$set": {"password_encrypted": foreign.credentials().seal(PASSWORD.as_bytes())}},
        )
        .await
        .unwrap();
    let error = world.find(&["orders"]).await.unwrap_err();
    assert!(
        matches!(error, EngineError::PasswordUnreadable { .. }),
        "{error:?}"
    );
    world.db.drop().await;
}

#[tokio::test]
async fn an_empty_key_version_is_plain_text_without_a_password() {
    let world = World::new().await;
    world
        .register(&NewConnection::postgres("open", "h", 5432, "d"), "1")
        .await;
    let stored = world
        .manager
        .connections()
        .find_one(doc! {"config_name": "open"})
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(stored.get_str("password_encrypted"), Ok(""));
    assert_eq!(stored.get_str("encryption_key_version"), Ok(""));

    // A Worker at any key version reads it.
    for version in ["1", "7"] {
        let found = connections::find(&world.store, &world.credentials(version), &["open"])
            .await
            .expect("plain text needs no key");
        assert!(found[0].password.is_empty());
        assert!(found[0].to_config().unwrap().password.is_empty());
    }
    world.db.drop().await;
}

#[tokio::test]
async fn the_known_answer_vector_opens_through_the_collection() {
    let world = World::new().await;
    let vector = &vectors("sealed.json")["sealed_password"];
    assert_eq!(vector["key_label"], "fetcher-credentials-v1");
    world.register(&orders(), "1").await;
    world
        .manager
        .connections()
        .update_one(
            doc! {"config_name": "orders"},
            doc! {"$set": {"password_encrypted": vector["sealed"].as_str().unwrap()}},
        )
        .await
        .unwrap();
    let found = world.find(&["orders"]).await.expect("opened");
    assert_eq!(
        found[0].password.expose(),
        vector["password"].as_str().unwrap()
    );
    world.db.drop().await;
}

#[tokio::test]
async fn a_document_go_cannot_read_fails_the_lookup_naming_it() {
    let world = World::new().await;
    world.register(&orders(), "1").await;
    world
        .manager
        .connections()
        .update_one(
            doc! {"config_name": "orders"},
            doc! {"$set": {"type": "DB2"}},
        )
        .await
        .unwrap();
    let error = world.find(&["orders"]).await.unwrap_err();
    assert!(
        matches!(&error, EngineError::InvalidConnection { connection, .. } if connection == "orders"),
        "{error:?}"
    );
    world.db.drop().await;
}

#[tokio::test]
async fn a_mongodb_connection_gets_upstreams_auth_source_and_direct_connection() {
    let world = World::new().await;
    let mut crm = NewConnection {
        kind: " mongodb ".to_owned(),
        password: PASSWORD.to_owned(),
        ssl_mode: Some("insecure".to_owned()),
        ..NewConnection::postgres("crm_store", "crm.internal", 27017, "crm")
    };
    world.register(&crm, "1").await;
    crm.config_name = "crm_direct".to_owned();
    crm.ssl_mode = None;
    crm.metadata = doc! {"authSource": "users", "directConnection": "true", "other": 1};
    world.register(&crm, "1").await;
    crm.config_name = "crm_plain".to_owned();
    crm.metadata = doc! {};
    crm.password = String::new();
    world.register(&crm, "1").await;

    let mut found = world
        .find(&["crm_store", "crm_direct"])
        .await
        .expect("found");
    found.sort_by(|a, b| a.config_name.cmp(&b.config_name));
    let direct = found[0].to_config().unwrap();
    let store = found[1].to_config().unwrap();
    assert_eq!(store.kind, DatasourceKind::MongoDb);
    assert_eq!(store.ssl_mode, SslMode::Require, "insecure: TLS unchecked");
    assert_eq!(
        store.options.get("authSource").map(String::as_str),
        Some("admin")
    );
    assert!(!store.options.contains_key("directConnection"));
    assert_eq!(direct.ssl_mode, SslMode::Disable);
    assert_eq!(
        direct.options.get("authSource").map(String::as_str),
        Some("users")
    );
    assert_eq!(
        direct.options.get("directConnection").map(String::as_str),
        Some("true")
    );
    world.db.drop().await;
}

/// A datasource of the environment, as `DATASOURCE_<NAME>_*` defines one.
fn env_datasource(name: &str, host: &str) -> ConnectionConfig {
    let vars = [
        ("CONFIG_NAME", name),
        ("TYPE", "POSTGRESQL"),
        ("HOST", host),
        ("DATABASE", "d"),
        ("USER", "u"),
    ]
    .map(|(suffix, value)| (format!("DATASOURCE_ENV_{suffix}"), value.to_owned()));
    engine::connection::from_env_vars(vars)
        .expect("a valid datasource")
        .remove(name)
        .expect("named")
}

#[tokio::test]
async fn resolving_follows_upstreams_precedence_in_the_names_order() {
    let world = World::new().await;
    world.register(&orders(), "1").await;
    world
        .register(
            &NewConnection::postgres("ledger", "ledger-db", 5432, "l"),
            "1",
        )
        .await;
    world
        .register(
            &NewConnection::postgres("plugin_crm", "crm-db", 5432, "c"),
            "1",
        )
        .await;
    let credentials = world.credentials("1");
    let mut env = BTreeMap::new();
    env.insert("orders".to_owned(), env_datasource("orders", "env-orders"));

    let resolved = connections::resolve(&world.store, &credentials, &env, &["ledger", "orders"])
        .await
        .expect("resolved");
    let hosts: Vec<&str> = resolved.iter().map(|c| c.host.as_str()).collect();
    assert_eq!(hosts, ["ledger-db", "env-orders"], "the environment's wins");

    // An internal name comes only from the environment, even when the collection has it.
    let error = connections::resolve(&world.store, &credentials, &env, &["plugin_crm"])
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("not configured via environment variables"),
        "{error}"
    );
    env.insert(
        "plugin_crm".to_owned(),
        env_datasource("plugin_crm", "env-crm"),
    );
    let resolved = connections::resolve(&world.store, &credentials, &env, &["plugin_crm"])
        .await
        .expect("from the environment");
    assert_eq!(resolved[0].host, "env-crm");

    let error = connections::resolve(&world.store, &credentials, &env, &["ledger", "nowhere"])
        .await
        .unwrap_err();
    assert!(
        matches!(error, EngineError::UnknownConnection(ref n) if n == "nowhere"),
        "{error}"
    );
    world.db.drop().await;
}

#[tokio::test]
async fn the_engines_resolver_reads_the_collection_with_the_same_precedence() {
    use std::sync::Arc;

    use engine::connection::Resolver;
    use mongostate::ManagerConnections;

    let world = World::new().await;
    world.register(&orders(), "1").await;
    world
        .register(&NewConnection::postgres("gone", "gone-db", 5432, "g"), "1")
        .await;
    assert!(world.manager.delete_connection("gone").await);
    world
        .register(
            &NewConnection::postgres("plugin_crm", "crm-db", 5432, "c"),
            "1",
        )
        .await;
    let mut env = BTreeMap::new();
    env.insert("pinned".to_owned(), env_datasource("pinned", "env-pinned"));
    let stored = ManagerConnections::new(world.store.clone(), world.credentials("1"));
    let resolver = Resolver::with_stored(env, Some(Arc::new(stored)));

    let orders = resolver
        .resolve("orders")
        .await
        .expect("from the collection");
    assert_eq!(orders.host, "orders-db.internal");
    assert_eq!(orders.password.expose(), PASSWORD);
    assert_eq!(
        resolver.resolve("pinned").await.expect("env").host,
        "env-pinned"
    );
    let removed = resolver.resolve("gone").await.unwrap_err();
    assert!(
        matches!(removed, EngineError::RemovedConnection(_)),
        "{removed}"
    );
    let unknown = resolver.resolve("nowhere").await.unwrap_err();
    assert!(
        matches!(unknown, EngineError::UnknownConnection(_)),
        "{unknown}"
    );
    let internal = resolver.resolve("plugin_crm").await.unwrap_err();
    assert!(
        internal
            .to_string()
            .contains("not configured via environment variables"),
        "{internal}"
    );
    world.db.drop().await;
}

//! Connection resolution against the real state database: sealed passwords, soft deletes,
//! key versions, precedence of environment datasources, and redaction-safe failures.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use crypto::KeySet;
use engine::connection::{
    from_env_vars, AllowedSchemas, ConnectionConfig, ConnectionStore, DatasourceKind,
    NewConnection, Password, Resolver, SslMode,
};
use engine::EngineError;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection};
use support::TestDb;

const PASSWORD: &str = "p@ss w0rd&=sentinel";

fn keys(master: &str) -> KeySet {
    KeySet::from_base64(master).unwrap()
}

/// The Worker's key: 32 bytes of 0x01.
fn worker_keys() -> KeySet {
    keys("AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=")
}

/// Another installation's key: 32 bytes of 0x02.
fn other_keys() -> KeySet {
    keys("AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=")
}

fn store(db: &TestDb, keys: &KeySet, version: &str) -> ConnectionStore {
    ConnectionStore::new(db.pool.clone(), keys.credentials().clone(), version)
}

fn new_connection(name: &str, host: &str) -> NewConnection {
    NewConnection {
        name: name.to_owned(),
        kind: DatasourceKind::Postgres,
        host: host.to_owned(),
        port: Some(6432),
        database: "ledger".to_owned(),
        user: "reader".to_owned(),
        password: Password::new(PASSWORD),
        ssl_mode: Some(SslMode::VerifyCa),
        options: BTreeMap::from([("statement_timeout".to_owned(), "30s".to_owned())]),
        schemas: None,
    }
}

/// No error text or `Debug` form ever carries the password.
fn assert_no_secret(error: &EngineError) {
    assert!(!error.to_string().contains(PASSWORD), "{error}");
    assert!(!format!("{error:?}").contains(PASSWORD), "{error:?}");
}

#[tokio::test]
async fn insert_then_find_round_trips_every_field_and_the_password() {
    let db = TestDb::migrated().await;
    let store = store(&db, &worker_keys(), "1");

    let id = store
        .insert(&new_connection("ledger", "db.internal"))
        .await
        .unwrap();
    let config = store.find("ledger").await.unwrap().expect("stored row");
    assert_eq!(config.name, "ledger");
    assert_eq!(config.kind, DatasourceKind::Postgres);
    assert_eq!(config.host, "db.internal");
    assert_eq!(config.port, 6432);
    assert_eq!(config.database, "ledger");
    assert_eq!(config.user, "reader");
    assert_eq!(config.password.expose(), PASSWORD);
    assert_eq!(config.ssl_mode, SslMode::VerifyCa);
    assert_eq!(config.options["statement_timeout"], "30s");
    assert!(!format!("{config:?}").contains(PASSWORD));

    // The column holds the sealed blob of contract §2 under the credentials key, never the text.
    let (sealed, version): (String, String) =
        sqlx::query_as("SELECT password_sealed, key_version FROM connections WHERE id = $1")
            .bind(id)
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert!(!sealed.contains(PASSWORD));
    assert_eq!(version, "1");
    let opened = worker_keys().credentials().open(&sealed).unwrap();
    assert_eq!(opened, PASSWORD.as_bytes());

    db.drop().await;
}

#[tokio::test]
async fn null_port_ssl_mode_and_password_read_back_as_defaults() {
    let db = TestDb::migrated().await;
    let store = store(&db, &worker_keys(), "1");
    let mut new = new_connection("orders", "mysql.internal");
    new.kind = DatasourceKind::MySql;
    new.port = None;
    new.ssl_mode = None;
    new.password = Password::default();
    new.options.clear();
    store.insert(&new).await.unwrap();

    let config = store.find("orders").await.unwrap().unwrap();
    assert_eq!(config.port, 3306);
    assert_eq!(config.ssl_mode, SslMode::Prefer);
    assert!(config.password.is_empty());
    assert!(config.options.is_empty());

    // A row without a password is usable whatever its key version.
    sqlx::query("UPDATE connections SET key_version = '9' WHERE name = 'orders'")
        .execute(&db.pool)
        .await
        .unwrap();
    assert!(store.find("orders").await.unwrap().is_some());

    db.drop().await;
}

#[tokio::test]
async fn names_match_exactly_and_unknown_names_are_not_found() {
    let db = TestDb::migrated().await;
    let store = store(&db, &worker_keys(), "1");
    store
        .insert(&new_connection("ledger", "db.internal"))
        .await
        .unwrap();

    assert!(store.find("Ledger").await.unwrap().is_none());
    assert!(store.find("missing").await.unwrap().is_none());

    let resolver = Resolver::new(BTreeMap::new(), Some(store));
    let error = resolver.resolve("missing").await.unwrap_err();
    assert!(matches!(error, EngineError::UnknownConnection(ref n) if n == "missing"));
    assert_eq!(
        error.to_string(),
        "connection not found for database: missing"
    );

    db.drop().await;
}

#[tokio::test]
async fn soft_deleted_rows_are_not_found_and_free_their_name() {
    let db = TestDb::migrated().await;
    let store = store(&db, &worker_keys(), "1");
    store
        .insert(&new_connection("ledger", "old.internal"))
        .await
        .unwrap();

    // One live row per name.
    let duplicate = store
        .insert(&new_connection("ledger", "dup.internal"))
        .await
        .unwrap_err();
    assert!(
        matches!(duplicate, EngineError::InvalidConnection { .. }),
        "{duplicate:?}"
    );
    assert!(duplicate.to_string().contains("already exists"));
    assert_no_secret(&duplicate);

    assert!(store.soft_delete("ledger").await.unwrap());
    assert!(!store.soft_delete("ledger").await.unwrap());
    assert!(store.find("ledger").await.unwrap().is_none());

    store
        .insert(&new_connection("ledger", "new.internal"))
        .await
        .unwrap();
    let config = store.find("ledger").await.unwrap().unwrap();
    assert_eq!(config.host, "new.internal");

    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM connections WHERE name = 'ledger'")
        .fetch_one(&db.pool)
        .await
        .unwrap();
    assert_eq!(rows, 2, "the deleted row stays for the record");

    db.drop().await;
}

#[tokio::test]
async fn schemas_round_trip_through_the_connections_table() {
    let db = TestDb::migrated().await;
    let store = store(&db, &worker_keys(), "1");
    let mut listed = new_connection("ledger", "db.internal");
    listed.schemas = Some(AllowedSchemas::parse("sales, public").unwrap());
    store.insert(&listed).await.unwrap();
    store
        .insert(&new_connection("open", "db.internal"))
        .await
        .unwrap();

    let config = store.find("ledger").await.unwrap().unwrap();
    let schemas = config.schemas.expect("an allow-list");
    assert_eq!(schemas.iter().collect::<Vec<_>>(), ["public", "sales"]);
    let column: Option<Vec<String>> =
        sqlx::query_scalar("SELECT schemas FROM connections WHERE name = 'ledger'")
            .fetch_one(&db.pool)
            .await
            .unwrap();
    assert_eq!(column, Some(vec!["public".to_owned(), "sales".to_owned()]));
    // NULL is no allow-list.
    assert!(store.find("open").await.unwrap().unwrap().schemas.is_none());

    // The column refuses lists that would be ambiguous: empty, or holding an empty name.
    for bad in ["{}", "{\"\"}", "{public,NULL}"] {
        let update = sqlx::query("UPDATE connections SET schemas = $1::text[] WHERE name = 'open'")
            .bind(bad)
            .execute(&db.pool)
            .await;
        assert!(update.is_err(), "{bad} was stored");
    }
    // A name that is only whitespace passes the check but not the loader.
    sqlx::query("UPDATE connections SET schemas = ARRAY['public', ' '] WHERE name = 'open'")
        .execute(&db.pool)
        .await
        .unwrap();
    let error = store.find("open").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "connection open: schemas column: entry 2 of the list is empty"
    );

    db.drop().await;
}

#[tokio::test]
async fn a_wrong_key_version_is_a_key_version_mismatch() {
    let db = TestDb::migrated().await;
    store(&db, &worker_keys(), "1")
        .insert(&new_connection("ledger", "db.internal"))
        .await
        .unwrap();

    let error = store(&db, &worker_keys(), "2")
        .find("ledger")
        .await
        .unwrap_err();
    match &error {
        EngineError::KeyVersionMismatch {
            connection,
            found,
            expected,
        } => {
            assert_eq!(connection, "ledger");
            assert_eq!(found, "1");
            assert_eq!(expected, "2");
        }
        other => panic!("expected KeyVersionMismatch, got {other:?}"),
    }
    assert_eq!(
        error.to_string(),
        "connection ledger: stored password uses key version 1, this Worker has version 2"
    );
    assert!(!error.is_retriable());
    assert_no_secret(&error);

    db.drop().await;
}

#[tokio::test]
async fn a_password_sealed_under_another_master_key_is_unreadable() {
    let db = TestDb::migrated().await;
    store(&db, &other_keys(), "1")
        .insert(&new_connection("ledger", "db.internal"))
        .await
        .unwrap();

    let error = store(&db, &worker_keys(), "1")
        .find("ledger")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, EngineError::PasswordUnreadable { connection } if connection == "ledger"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "connection ledger: stored password cannot be decrypted with this Worker's key"
    );
    assert_no_secret(&error);

    // An altered blob is unreadable too.
    sqlx::query("UPDATE connections SET password_sealed = 'bm90IGEgc2VhbGVkIGJsb2I='")
        .execute(&db.pool)
        .await
        .unwrap();
    let error = store(&db, &other_keys(), "1")
        .find("ledger")
        .await
        .unwrap_err();
    assert!(matches!(error, EngineError::PasswordUnreadable { .. }));

    db.drop().await;
}

#[tokio::test]
async fn an_unusable_row_is_an_invalid_connection() {
    let db = TestDb::migrated().await;
    let store = store(&db, &worker_keys(), "1");
    store
        .insert(&new_connection("ledger", "db.internal"))
        .await
        .unwrap();
    sqlx::query("UPDATE connections SET ssl_mode = 'sometimes'")
        .execute(&db.pool)
        .await
        .unwrap();

    let error = store.find("ledger").await.unwrap_err();
    assert!(
        matches!(error, EngineError::InvalidConnection { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("ssl_mode column"), "{error}");
    assert_no_secret(&error);

    db.drop().await;
}

#[tokio::test]
async fn the_environment_wins_over_the_store() {
    let db = TestDb::migrated().await;
    let store = store(&db, &worker_keys(), "1");
    store
        .insert(&new_connection("ledger", "stored.internal"))
        .await
        .unwrap();
    store
        .insert(&new_connection("archive", "archive.internal"))
        .await
        .unwrap();

    let env = from_env_vars(
        [
            ("DATASOURCE_LEDGER_TYPE", "POSTGRESQL"),
            ("DATASOURCE_LEDGER_HOST", "env.internal"),
            ("DATASOURCE_LEDGER_DATABASE", "ledger"),
            ("DATASOURCE_LEDGER_USER", "env-user"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned())),
    )
    .unwrap();
    let resolver = Resolver::new(env, Some(store));

    let ledger = resolver.resolve("ledger").await.unwrap();
    assert_eq!(ledger.host, "env.internal");
    assert_eq!(ledger.user, "env-user");
    assert!(ledger.password.is_empty());

    let archive = resolver.resolve("archive").await.unwrap();
    assert_eq!(archive.host, "archive.internal");
    assert_eq!(archive.password.expose(), PASSWORD);

    assert!(matches!(
        resolver.resolve("nowhere").await.unwrap_err(),
        EngineError::UnknownConnection(_)
    ));

    db.drop().await;
}

#[tokio::test]
async fn migrations_run_once_and_are_recorded() {
    let db = TestDb::migrated().await;
    schema::migrate(&db.pool).await.unwrap();

    let versions: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
            .fetch_all(&db.pool)
            .await
            .unwrap();
    let expected: Vec<i64> = schema::migrations().iter().map(|m| m.version).collect();
    assert_eq!(versions, expected);

    // The partial unique index and the type check are in place.
    let bad_type = sqlx::query(
        "INSERT INTO connections (name, type, host, database, username) \
         VALUES ('x', 'CASSANDRA', 'h', 'd', 'u')",
    )
    .execute(&db.pool)
    .await;
    assert!(bad_type.is_err());

    db.drop().await;
}

/// A local TCP port with nothing listening on it.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn an_unreachable_store_fails_retriably_without_naming_the_host() {
    let port = closed_port();
    let options = PgConnectOptions::new_without_pgpass()
        .host("127.0.0.1")
        .port(port)
        .username("postgres")
        .database("state");
    let pool = PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy_with(options);
    let store = ConnectionStore::new(pool, worker_keys().credentials().clone(), "1");

    let error = Resolver::new(BTreeMap::new(), Some(store))
        .resolve("ledger")
        .await
        .unwrap_err();
    assert!(matches!(error, EngineError::Store(_)), "{error:?}");
    assert!(error.is_retriable());
    let text = error.to_string();
    assert!(text.starts_with("connection store unavailable: "), "{text}");
    assert!(!text.contains("127.0.0.1"), "{text}");
    assert!(!text.contains(&port.to_string()), "{text}");
}

#[tokio::test]
async fn an_unreachable_datasource_fails_without_naming_host_user_or_password() {
    let port = closed_port();
    let config = ConnectionConfig {
        name: "ledger".to_owned(),
        kind: DatasourceKind::Postgres,
        host: "127.0.0.1".to_owned(),
        port,
        database: "ledger".to_owned(),
        user: "reader-sentinel".to_owned(),
        password: Password::new(PASSWORD),
        ssl_mode: SslMode::Disable,
        options: BTreeMap::new(),
        schemas: None,
    };
    let error = PgConnection::connect_with(&config.pg_options().unwrap())
        .await
        .unwrap_err();
    // What the engine's connect step reports (`EngineError::Connect`, redacted driver text).
    let error = EngineError::Connect {
        connection: config.name.clone(),
        detail: contract::redact(&error.to_string()),
        transient: true,
    };
    let text = error.to_string();
    assert!(
        text.starts_with("failed to connect to datasource ledger: "),
        "{text}"
    );
    for secret in ["127.0.0.1", &port.to_string(), "reader-sentinel", PASSWORD] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
}

//! Queries name exactly the table that was validated, and datasource sessions are read-only:
//! nothing resolves through a user-controlled `search_path`, and a view whose function writes
//! fails the job without writing.

mod support;

use engine::{EngineConfig, EngineError};
use serde_json::json;
use support::harness::{engine_for, extract};
use support::mysql::{MariaDb, MariaDbEngine};
use support::TestDb;

async fn pg_exec(db: &TestDb, sql: &str) {
    sqlx::raw_sql(sql)
        .execute(&db.pool)
        .await
        .unwrap_or_else(|e| panic!("fixture SQL failed: {e}\n{sql}"));
}

#[tokio::test]
async fn postgres_a_bare_name_reads_the_public_table_not_pg_catalogs() {
    let db = TestDb::create().await;
    // A decoy that passes validation as `public.pg_authid`; `pg_catalog` comes first in any
    // search_path, so an unqualified query would read the real one.
    pg_exec(
        &db,
        "CREATE TABLE public.pg_authid (rolname text); \
         INSERT INTO public.pg_authid VALUES ('decoy');",
    )
    .await;
    let engine = engine_for(&[("pg", &db)], EngineConfig::default());
    let result = extract(&engine, "pg", "pg_authid", &["rolname"])
        .await
        .expect("the public table extracts");
    assert_eq!(result, json!({"pg": {"pg_authid": [{"rolname": "decoy"}]}}));
    db.drop().await;
}

#[tokio::test]
async fn postgres_a_bare_name_reads_public_not_the_users_own_schema() {
    let db = TestDb::create().await;
    let user: String = sqlx::query_scalar("SELECT current_user::text")
        .fetch_one(&db.pool)
        .await
        .expect("current_user");
    // `"$user"` comes before `public` in the default search_path.
    let schema = user.replace('"', "\"\"");
    pg_exec(
        &db,
        &format!(
            "CREATE SCHEMA \"{schema}\"; \
             CREATE TABLE \"{schema}\".t (v text); INSERT INTO \"{schema}\".t VALUES ('role schema'); \
             CREATE TABLE public.t (v text); INSERT INTO public.t VALUES ('public');"
        ),
    )
    .await;
    let engine = engine_for(&[("pg", &db)], EngineConfig::default());
    let bare = extract(&engine, "pg", "t", &["v"])
        .await
        .expect("t extracts");
    assert_eq!(bare, json!({"pg": {"t": [{"v": "public"}]}}));
    let qualified = extract(&engine, "pg", &format!("{user}.t"), &["v"])
        .await
        .expect("the role's schema extracts when named");
    assert_eq!(
        qualified,
        json!({"pg": {format!("{user}.t"): [{"v": "role schema"}]}})
    );
    db.drop().await;
}

#[tokio::test]
async fn postgres_sessions_run_read_only_with_a_system_search_path() {
    let db = TestDb::create().await;
    pg_exec(
        &db,
        "CREATE VIEW session AS SELECT current_setting('search_path') AS search_path, \
                current_setting('transaction_read_only') AS read_only;",
    )
    .await;
    let engine = engine_for(&[("pg", &db)], EngineConfig::default());
    let result = extract(&engine, "pg", "session", &["read_only", "search_path"])
        .await
        .expect("the view extracts");
    assert_eq!(
        result,
        json!({"pg": {"session": [{"read_only": "on", "search_path": "pg_catalog,pg_temp"}]}})
    );
    db.drop().await;
}

#[tokio::test]
async fn postgres_a_view_whose_function_writes_fails_and_writes_nothing() {
    let db = TestDb::create().await;
    pg_exec(
        &db,
        "CREATE TABLE public.audit (n int);
         CREATE FUNCTION public.bump() RETURNS int LANGUAGE plpgsql VOLATILE AS
           $$ BEGIN INSERT INTO public.audit VALUES (1); RETURN 1; END $$;
         CREATE VIEW public.v AS SELECT public.bump() AS n;",
    )
    .await;
    let engine = engine_for(&[("pg", &db)], EngineConfig::default());
    let result = extract(&engine, "pg", "v", &["n"]).await;
    match result {
        Err(error @ EngineError::Query { .. }) => {
            assert!(
                error.to_string().contains("read-only transaction"),
                "{error}"
            )
        }
        other => panic!("expected a read-only query error, got {other:?}"),
    }
    let written: i64 = sqlx::query_scalar("SELECT count(*) FROM public.audit")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(written, 0, "the extraction wrote a row");
    db.drop().await;
}

/// A lone table is read without a transaction of its own, read-only by the session's default; a
/// view that turns that default off (it may, for later transactions) must not make the next
/// read on the same connection writable.
#[tokio::test]
async fn postgres_a_view_that_turns_read_only_off_leaves_the_next_read_read_only() {
    let db = TestDb::create().await;
    pg_exec(
        &db,
        "CREATE TABLE public.audit (n int);
         CREATE FUNCTION public.unguard() RETURNS int LANGUAGE plpgsql VOLATILE AS
           $$ BEGIN PERFORM set_config('default_transaction_read_only', 'off', false); RETURN 1; END $$;
         CREATE VIEW public.unguard AS SELECT public.unguard() AS n;
         CREATE FUNCTION public.bump() RETURNS int LANGUAGE plpgsql VOLATILE AS
           $$ BEGIN INSERT INTO public.audit VALUES (1); RETURN 1; END $$;
         CREATE VIEW public.v AS SELECT public.bump() AS n;",
    )
    .await;
    // One connection: the second read runs on the session the first one changed.
    let config = EngineConfig {
        pool_max_connections: 1,
        ..EngineConfig::default()
    };
    let engine = engine_for(&[("pg", &db)], config);
    extract(&engine, "pg", "unguard", &["n"])
        .await
        .expect("the view that turns the default off extracts");
    let result = extract(&engine, "pg", "v", &["n"]).await;
    match result {
        Err(error @ EngineError::Query { .. }) => {
            assert!(
                error.to_string().contains("read-only transaction"),
                "{error}"
            )
        }
        other => panic!("expected a read-only query error, got {other:?}"),
    }
    let written: i64 = sqlx::query_scalar("SELECT count(*) FROM public.audit")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(written, 0, "the extraction wrote a row");
    db.drop().await;
}

#[tokio::test]
async fn mysql_a_view_whose_function_writes_fails_and_writes_nothing() {
    let db = MariaDb::create().await;
    db.exec(
        "CREATE TABLE audit (n INT);
         CREATE FUNCTION bump() RETURNS INT MODIFIES SQL DATA
           BEGIN INSERT INTO audit VALUES (1); RETURN 1; END;
         CREATE VIEW v AS SELECT bump() AS n;",
    )
    .await;
    let engine = db.engine("my");
    let result = extract(&engine, "my", "v", &["n"]).await;
    match result {
        Err(error @ EngineError::Query { .. }) => {
            assert!(error.to_string().contains("READ ONLY"), "{error}")
        }
        other => panic!("expected a read-only query error, got {other:?}"),
    }
    let written: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM audit")
        .fetch_one(&db.pool)
        .await
        .expect("count");
    assert_eq!(written, 0, "the extraction wrote a row");
    db.drop().await;
}

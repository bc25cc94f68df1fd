//! The state database's schema: the top-level `migrations/*.sql`, embedded in the binary.
//!
//! Every crate that touches the state database (the engine's `connections` table, the outbox's
//! jobs and events) and the Worker at start use this one migrator. It depends on `sqlx` only.
//!
//! A deployed Worker has no source tree, so the SQL files are compiled in with `include_str!`
//! rather than read from a directory at run time (sqlx's `migrate!` macro would do the same, but
//! needs sqlx's `macros` feature, which this workspace leaves off). They run through sqlx's own
//! [`Migrator`], which records them in `_sqlx_migrations` exactly as `sqlx migrate run` on the
//! same directory would (same versions, descriptions and checksums), takes an advisory lock so
//! concurrent Workers migrate once, and refuses a database whose applied files were edited.
//!
//! # Adding a migration
//!
//! Add `migrations/NNNN_description.sql` at the repository root (the next number, never editing
//! an applied file) and append one `embed!` line to `EMBEDDED`. A unit test fails until the
//! list and the directory agree.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;

use sqlx::error::BoxDynError;
use sqlx::migrate::{MigrateError, Migration, MigrationSource, MigrationType, Migrator};
use sqlx::PgPool;

/// One embedded migration file.
struct Embedded {
    version: i64,
    /// The file name after `NNNN_`, without `.sql`, `_` read as a space (sqlx's rule).
    description: &'static str,
    /// Read by the tests that check this list against the directory.
    #[cfg_attr(not(test), allow(dead_code))]
    file: &'static str,
    sql: &'static str,
}

/// Embeds `migrations/<file>` with its version and description.
macro_rules! embed {
    ($version:literal, $description:literal, $file:literal) => {
        Embedded {
            version: $version,
            description: $description,
            file: $file,
            sql: include_str!(concat!("../../../migrations/", $file)),
        }
    };
}

/// Every migration of the state database, oldest first.
const EMBEDDED: &[Embedded] = &[
    embed!(1, "connections", "0001_connections.sql"),
    embed!(2, "jobs and outbox", "0002_jobs_and_outbox.sql"),
    embed!(3, "outbox fillfactor", "0003_outbox_fillfactor.sql"),
    embed!(4, "connections schemas", "0004_connections_schemas.sql"),
    embed!(5, "jobs message digest", "0005_jobs_message_digest.sql"),
    embed!(6, "job lifecycle", "0006_job_lifecycle.sql"),
    embed!(7, "outbox sinks", "0007_outbox_sinks.sql"),
    embed!(8, "jobs listing", "0008_jobs_listing.sql"),
    embed!(9, "retention and listing", "0009_retention_and_listing.sql"),
    embed!(10, "execution attempts", "0010_execution_attempts.sql"),
    embed!(11, "datasource slots", "0011_datasource_slots.sql"),
    embed!(12, "jobs traceparent", "0012_jobs_traceparent.sql"),
];

/// The embedded migrations as sqlx runs them.
pub fn migrations() -> Vec<Migration> {
    EMBEDDED
        .iter()
        .map(|m| {
            Migration::new(
                m.version,
                Cow::Borrowed(m.description),
                MigrationType::Simple,
                Cow::Borrowed(m.sql),
                // sqlx's opt-out marker for statements that cannot run in a transaction.
                m.sql.starts_with("-- no-transaction"),
            )
        })
        .collect()
}

/// A [`Migrator`] over the embedded migrations.
pub async fn migrator() -> Result<Migrator, MigrateError> {
    Migrator::new(EmbeddedSource).await
}

/// Brings the state database up to `version` only (an upgrade test starts from an older schema).
pub async fn migrate_to(pool: &PgPool, version: i64) -> Result<(), MigrateError> {
    let mut migrator = migrator().await?;
    migrator.migrations = Cow::Owned(
        migrations()
            .into_iter()
            .filter(|m| m.version <= version)
            .collect(),
    );
    migrator.run(pool).await
}

/// Brings the state database up to the latest schema; a no-op when it already is. Safe to call
/// from several Workers at once.
pub async fn migrate(pool: &PgPool) -> Result<(), MigrateError> {
    migrator().await?.run(pool).await
}

#[derive(Debug)]
struct EmbeddedSource;

impl MigrationSource<'static> for EmbeddedSource {
    fn resolve(
        self,
    ) -> Pin<Box<dyn Future<Output = Result<Vec<Migration>, BoxDynError>> + Send + 'static>> {
        Box::pin(async { Ok(migrations()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_matches_the_migrations_directory() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../migrations");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".sql"))
            .collect();
        files.sort();
        let embedded: Vec<&str> = EMBEDDED.iter().map(|m| m.file).collect();
        assert_eq!(
            embedded, files,
            "every file of migrations/ is embedded, in order"
        );
    }

    #[test]
    fn versions_and_descriptions_follow_the_file_names() {
        let mut previous = 0;
        for m in EMBEDDED {
            let (version, rest) = m.file.split_once('_').unwrap();
            assert_eq!(version.parse::<i64>().unwrap(), m.version, "{}", m.file);
            assert_eq!(
                rest.trim_end_matches(".sql").replace('_', " "),
                m.description
            );
            assert!(m.version > previous, "versions increase: {}", m.file);
            previous = m.version;
        }
    }

    #[tokio::test]
    async fn the_migrator_holds_every_migration() {
        let migrator = migrator().await.unwrap();
        let versions: Vec<i64> = migrator.iter().map(|m| m.version).collect();
        let expected: Vec<i64> = EMBEDDED.iter().map(|m| m.version).collect();
        assert_eq!(versions, expected);
    }
}

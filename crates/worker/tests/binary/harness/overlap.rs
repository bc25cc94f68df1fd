//! [`Overlap`]: the most reads of the source's `capped` view the source database ran at once,
//! sampled from `pg_stat_activity` every 20 ms while jobs run: what a datasource's concurrency
//! cap (`DATASOURCE_<NAME>_MAX_CONCURRENT`) must hold down, seen from the server's side.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::World;

/// A view each read of which takes 0.4 s: the jobs' statements overlap unless held apart.
const CAPPED_VIEW: &str = "CREATE VIEW capped AS SELECT id FROM payments, pg_sleep(0.4)";

impl World {
    /// Creates the view `capped` on the source database: `payments`' ids, each read 0.4 s long.
    pub async fn create_capped_view(&self) {
        let source = sqlx::PgPool::connect(self.source_url())
            .await
            .expect("source");
        sqlx::query(CAPPED_VIEW)
            .execute(&source)
            .await
            .expect("view");
        source.close().await;
    }
}

/// The sampler, running until [`Overlap::stop`].
pub struct Overlap {
    most: Arc<AtomicI64>,
    stop: CancellationToken,
    sampler: tokio::task::JoinHandle<()>,
}

impl Overlap {
    /// Starts sampling the reads of `world`'s `capped` view (from the test's own pool on the
    /// state database, which sees the whole server).
    pub fn start(world: &World) -> Overlap {
        let most = Arc::new(AtomicI64::new(0));
        let stop = CancellationToken::new();
        let sampler = tokio::spawn({
            let (most, stop) = (most.clone(), stop.clone());
            let (state, database) = (world.state.clone(), world.source_db.clone());
            async move {
                let mut ticks = tokio::time::interval(Duration::from_millis(20));
                while !stop.is_cancelled() {
                    ticks.tick().await;
                    let running = capped_statements(&state, &database).await;
                    most.fetch_max(running, Ordering::Relaxed);
                }
            }
        });
        Overlap {
            most,
            stop,
            sampler,
        }
    }

    /// Stops sampling: the most reads seen at once.
    pub async fn stop(self) -> i64 {
        self.stop.cancel();
        self.sampler.await.expect("sampler");
        self.most.load(Ordering::Relaxed)
    }
}

/// The source's active statements that read `capped`, the test's own excepted.
async fn capped_statements(pool: &sqlx::PgPool, database: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE datname = $1 AND state = 'active' AND query ILIKE '%capped%'
           AND pid <> pg_backend_pid()",
    )
    .bind(database)
    .fetch_one(pool)
    .await
    .expect("pg_stat_activity")
}

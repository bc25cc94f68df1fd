//! What the hostile tests alone share: the source database's fingerprint, and the cleanup of a
//! flood's work queue on another broker.

use crate::harness::World;

/// The source table's row count and a checksum of its rows, plus the list of its tables.
pub async fn source_fingerprint(world: &World) -> (i64, String, String) {
    let pool = sqlx::PgPool::connect(world.source_url())
        .await
        .expect("connect source");
    let (rows, checksum): (i64, String) = sqlx::query_as(
        "SELECT count(*), md5(coalesce(string_agg(p::text, '|' ORDER BY id), '')) FROM payments p",
    )
    .fetch_one(&pool)
    .await
    .expect("checksum");
    let tables: String = sqlx::query_scalar(
        "SELECT coalesce(string_agg(relname, ',' ORDER BY relname), '') FROM pg_class \
         WHERE relnamespace = 'public'::regnamespace",
    )
    .fetch_one(&pool)
    .await
    .expect("tables");
    pool.close().await;
    (rows, checksum, tables)
}

/// Removes the flood's work queue if the test panics before `World::cleanup`, from the broker
/// the flood used: `HOSTILE_AMQP_URI` may name another broker than the one the world's own `Drop`
/// cleans, and a failed flood would leave tens of thousands of messages in a durable queue.
pub struct PanicCleanup {
    amqp: String,
    queue: String,
}

impl PanicCleanup {
    pub fn new(world: &World, amqp: &str) -> PanicCleanup {
        PanicCleanup {
            amqp: amqp.to_owned(),
            queue: world.queue.clone(),
        }
    }
}

impl Drop for PanicCleanup {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let (amqp, queue) = (self.amqp.clone(), self.queue.clone());
        testkit::cleanup::run_detached(move || async move {
            if let Ok(connection) =
                lapin::Connection::connect(&amqp, lapin::ConnectionProperties::default()).await
            {
                if let Ok(channel) = connection.create_channel().await {
                    let _ = channel
                        .queue_delete(queue.as_str().into(), Default::default())
                        .await;
                }
                let _ = connection.close(200, "OK".into()).await;
            }
        });
    }
}

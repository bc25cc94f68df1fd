//! The test when a connection is taken, made only after a second idle.

use std::time::Duration;

use sqlx::pool::PoolOptions;
use sqlx::Connection;

/// How long a pooled connection may sit idle and still be lent without a round trip to test
/// it first; a kept connection ([`crate::Kept`]) idle longer goes back to the pool, and through
/// its test, instead of being used. One that answered that recently is almost always still
/// there, and under load, where the round trips cost, connections are idle for milliseconds.
/// A connection that died within that time (the server restarted) fails its first statement,
/// which each user of a pool handles as the server going away mid-statement.
pub const TEST_AFTER_IDLE: Duration = Duration::from_secs(1);

/// `options` with sqlx's test when a connection is taken made only after [`TEST_AFTER_IDLE`]
/// idle.
pub fn tested_after_idle<DB: sqlx::Database>(options: PoolOptions<DB>) -> PoolOptions<DB> {
    options
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > TEST_AFTER_IDLE {
                    conn.ping().await?;
                }
                Ok(true)
            })
        })
}

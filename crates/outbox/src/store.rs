//! The state store: a handle on the state database's pool.

use std::sync::Arc;
use std::time::Duration;

use sqlpool::{Cap, Kept, Lent};
use sqlx::postgres::types::PgInterval;
use sqlx::{PgPool, Postgres};

/// Job state and the outbox in one PostgreSQL database (migrated with `schema::migrate`).
/// Cheap to clone: clones share the pool and the connections kept out of it ([`sqlpool::Kept`]).
///
/// Every lease and age is computed with the database's clock (`now()`), so Workers whose clocks
/// disagree still agree on who holds what.
#[derive(Debug, Clone)]
pub struct Store {
    pool: PgPool,
    /// The job path's connections, kept out of the pool between its statements.
    kept: Kept<Postgres>,
    /// The MQTT mirror's topic prefix, when the mirror is on.
    mirror: Option<Arc<str>>,
}

impl Store {
    pub fn new(pool: PgPool) -> Store {
        Store {
            // The pool's other users (the repairer, the sweeper, retention, the control API) take
            // connections from it directly: half stay theirs.
            kept: Kept::new(pool.clone(), Cap::Half),
            pool,
            mirror: None,
        }
    }

    /// This store with the MQTT mirror on: every event it records gets an MQTT row too, its
    /// topic under `prefix` (lifecycle §5; check it with `contract::event::mirror::valid_prefix`).
    pub fn mirrored(self, prefix: &str) -> Store {
        Store {
            mirror: Some(prefix.into()),
            ..self
        }
    }

    /// The mirror's topic prefix, when it is on.
    pub fn mirror(&self) -> Option<&str> {
        self.mirror.as_deref()
    }

    /// The pool, for readiness checks.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A connection for one of the job path's statements: a kept one, or one from the pool
    /// ([`sqlpool::Kept`]); end the statement with [`Lent::finish`]. Failing to get one is
    /// `step`'s error.
    pub(crate) async fn lend(&self, step: &'static str) -> crate::error::Result<Lent<Postgres>> {
        self.kept
            .lend()
            .await
            .map_err(|e| crate::error::OutboxError::sqlx(step, e))
    }

    /// Gives the kept connections back to the pool, keeps no more, and closes the pool: waits
    /// until every connection still lent (a statement running) is given back too
    /// ([`Kept::close`]).
    pub async fn close(&self) {
        self.kept.close().await;
    }
}

/// `duration` as a PostgreSQL interval, truncated to microseconds (the interval's precision;
/// sqlx's own `Duration` encoding refuses sub-microsecond parts, which jittered backoffs have)
/// and saturated at `i64::MAX` microseconds (about 292,000 years).
pub(crate) fn interval(duration: Duration) -> PgInterval {
    PgInterval {
        months: 0,
        days: 0,
        microseconds: i64::try_from(duration.as_micros()).unwrap_or(i64::MAX),
    }
}

/// Runs `statement`, which deletes at most `batch` rows, until one deletes fewer: short
/// statements and locks, however large the backlog. Returns how many rows were deleted.
pub(crate) async fn in_batches<F, Fut>(
    step: &'static str,
    batch: i64,
    mut statement: F,
) -> crate::error::Result<u64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = crate::error::Result<u64>>,
{
    if batch < 1 {
        return Err(crate::error::OutboxError::invalid(
            step,
            format!("batch size {batch} is under 1"),
        ));
    }
    let mut total = 0;
    loop {
        let deleted = statement().await?;
        total += deleted;
        // `batch` is at least 1, so the cast is lossless.
        if deleted < batch.unsigned_abs() {
            return Ok(total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_drop_nanoseconds_and_saturate() {
        assert_eq!(interval(Duration::from_nanos(1_500)).microseconds, 1);
        assert_eq!(interval(Duration::from_secs(2)).microseconds, 2_000_000);
        assert_eq!(interval(Duration::MAX).microseconds, i64::MAX);
    }
}

//! A few of the state pool's connections kept out of it between the job path's statements, so a
//! statement there does not pay sqlx's test when a connection is given back.
//!
//! sqlx tests every connection given back to its pool with a round trip (a bare `Sync`,
//! answered `ReadyForQuery`) before anyone else may take it: that test is what puts only a live
//! connection, in a known protocol state, back in the pool. On the job path (the claim, the
//! lease renewal that fences the publishing of an object, the terminal record, the event marked
//! published) it was one round trip per statement. A connection kept here stays checked out of
//! the pool (a `PoolConnection` held, never dropped between statements), so no test runs; it
//! still counts in the pool's size, so `max_connections` holds.
//!
//! The rules, each keeping what the pool's own test gave:
//! - A connection is kept only after a statement on it succeeded. On any error, and when its
//!   holder is dropped before the statement finished (a cancelled future may leave it mid-way
//!   through the protocol), it goes back to the pool, whose test then decides (a dead or
//!   confused connection is closed, never kept or lent).
//! - Idle longer than [`KEPT_IDLE`], the rule the pools test a connection by before lending
//!   it, a kept connection goes back to the pool (and through its test) instead of being used:
//!   at the next statement, or by a background sweep. A server restart is caught as for a
//!   pooled connection: within the untested second a statement may fail (the job is retried),
//!   after it the connection is tested before any statement sees it.
//! - Out of the pool for more than [`KEPT_OUT`] in all, it goes back after its next statement,
//!   so the pool's `max_lifetime` and its other checks still apply.
//! - At most half the pool's connections are kept, so the pool's other users (the repairer,
//!   the sweeper, the control API, the job path's other statements) always have the other
//!   half. A pool of one connection keeps none: the one kept would starve everyone else. When
//!   no kept connection is free, a statement takes one from the pool as before, and keeps it
//!   afterwards if there is room.
//! - When the pool closes (`Pool::close`, which waits for every checked-out connection, or
//!   [`crate::Store::close`]), the kept connections go back at once and no more are kept.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres};

/// How long a kept connection may sit idle and still be used without going back to the pool
/// (and through its test) first: the pools' rule (`engine::TEST_AFTER_IDLE`, which this crate
/// may not depend on; the Worker checks that the two agree).
pub const KEPT_IDLE: Duration = Duration::from_secs(1);

/// How long a connection may stay out of the pool in all before it goes back after its next
/// statement.
pub const KEPT_OUT: Duration = Duration::from_secs(60);

/// How long past a connection's idle second the sweep wakes for it.
const SWEEP_SLACK: Duration = Duration::from_millis(5);

/// The kept connections of one pool; clones share them.
#[derive(Debug, Clone)]
pub(crate) struct Kept(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    pool: PgPool,
    /// At most this many connections kept (free or lent).
    cap: usize,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The kept connections not lent, the most recently used last.
    free: Vec<Keeper>,
    /// Kept connections, free or lent.
    count: usize,
    /// A sweep task runs (it does while `free` is not empty).
    sweeping: bool,
    /// [`Kept::close`] was called: nothing more is kept.
    closed: bool,
}

#[derive(Debug)]
struct Keeper {
    conn: PoolConnection<Postgres>,
    /// When it was taken from the pool.
    out_since: Instant,
    /// When its last statement ended.
    used_at: Instant,
}

/// A connection lent to one statement: a kept one, or one taken from the pool. Call
/// [`Lent::finish`] with the statement's result; dropped without it, the connection goes back
/// to the pool.
#[derive(Debug)]
pub(crate) struct Lent<'a> {
    kept: &'a Arc<Inner>,
    conn: Option<PoolConnection<Postgres>>,
    out_since: Instant,
    /// It is one of the kept connections (counted in `State::count`).
    is_kept: bool,
}

impl Kept {
    pub(crate) fn new(pool: PgPool) -> Kept {
        let max = pool.options().get_max_connections();
        Kept(Arc::new(Inner {
            cap: usize::try_from(max / 2).unwrap_or(usize::MAX),
            pool,
            state: Mutex::default(),
        }))
    }

    /// A connection for one statement: the most recently used kept one that has not been idle
    /// longer than [`KEPT_IDLE`], or else one from the pool.
    pub(crate) async fn lend(&self) -> Result<Lent<'_>, sqlx::Error> {
        let inner = &self.0;
        let (keeper, stale) = {
            let mut state = inner.lock();
            let now = Instant::now();
            let stale = if state.closed || inner.pool.is_closed() {
                state.drain()
            } else {
                state.stale(now)
            };
            (state.free.pop(), stale)
        };
        // Each goes back to the pool, through its test.
        drop(stale);
        if let Some(keeper) = keeper {
            return Ok(Lent {
                kept: inner,
                conn: Some(keeper.conn),
                out_since: keeper.out_since,
                is_kept: true,
            });
        }
        let conn = inner.pool.acquire().await?;
        Ok(Lent {
            kept: inner,
            conn: Some(conn),
            out_since: Instant::now(),
            is_kept: false,
        })
    }

    /// Gives every kept connection back to the pool and keeps no more: before the pool closes.
    pub(crate) fn close(&self) {
        let drained = {
            let mut state = self.0.lock();
            state.closed = true;
            state.drain()
        };
        drop(drained);
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent under a panic: every change is a few plain assignments.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `conn` after a successful statement, or gives it back; `Some` when it was kept and
    /// no sweep runs: the caller starts one.
    fn settle(
        &self,
        conn: PoolConnection<Postgres>,
        out_since: Instant,
        is_kept: bool,
        succeeded: bool,
    ) -> bool {
        let now = Instant::now();
        let mut state = self.lock();
        let keep = succeeded
            && !state.closed
            && !self.pool.is_closed()
            && now.saturating_duration_since(out_since) < KEPT_OUT
            && (is_kept || state.count < self.cap);
        if !keep {
            if is_kept {
                state.count -= 1;
            }
            drop(state);
            // Back to the pool, through its test.
            drop(conn);
            return false;
        }
        if !is_kept {
            state.count += 1;
        }
        state.free.push(Keeper {
            conn,
            out_since,
            used_at: now,
        });
        !std::mem::replace(&mut state.sweeping, true)
    }

    /// Gives back the connections idle too long; when the next one will be, or `None` (and the
    /// sweep ends) when none is left.
    fn sweep(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut state = self.lock();
        let stale = state.stale(now);
        // Just past the second (the rule is "longer than"), so one wake-up finds it stale.
        let next = state
            .free
            .iter()
            .map(|k| k.used_at + KEPT_IDLE + SWEEP_SLACK)
            .min();
        if next.is_none() {
            state.sweeping = false;
        }
        drop(state);
        drop(stale);
        next
    }

    /// The pool closed: every free connection goes back (and is closed by it), and the sweep
    /// ends.
    fn closed(&self) {
        let mut state = self.lock();
        let drained = state.drain();
        state.sweeping = false;
        drop(state);
        drop(drained);
    }
}

impl State {
    /// Takes the free connections idle longer than [`KEPT_IDLE`] out of the set.
    fn stale(&mut self, now: Instant) -> Vec<Keeper> {
        let stale: Vec<Keeper> = self
            .free
            .extract_if(.., |k| now.saturating_duration_since(k.used_at) > KEPT_IDLE)
            .collect();
        self.count -= stale.len();
        stale
    }

    /// Takes every free connection out of the set.
    fn drain(&mut self) -> Vec<Keeper> {
        let drained = std::mem::take(&mut self.free);
        self.count -= drained.len();
        drained
    }
}

/// Sweeps `kept`'s idle connections back to the pool while it has any, and all of them the
/// moment the pool closes (`Pool::close` would otherwise wait for them for ever). It holds the
/// set weakly: once every store is gone, the set and its connections are dropped.
fn spawn_sweep(kept: &Arc<Inner>) {
    let weak: Weak<Inner> = Arc::downgrade(kept);
    let closing = kept.pool.close_event();
    tokio::spawn(async move {
        let mut closing = std::pin::pin!(closing);
        loop {
            let Some(next) = weak.upgrade().and_then(|kept| kept.sweep()) else {
                return;
            };
            tokio::select! {
                () = tokio::time::sleep_until(next.into()) => {}
                _ = closing.as_mut() => {
                    if let Some(kept) = weak.upgrade() {
                        kept.closed();
                    }
                    return;
                }
            }
        }
    });
}

impl Lent<'_> {
    /// Ends the statement: on success the connection is kept (or stays kept) when the rules
    /// allow, else it goes back to the pool.
    pub(crate) fn finish<T, E>(mut self, result: &Result<T, E>) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if self
            .kept
            .settle(conn, self.out_since, self.is_kept, result.is_ok())
        {
            spawn_sweep(self.kept);
        }
    }
}

impl Deref for Lent<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        // Present until `finish` or `drop` takes it, and neither hands `self` out again.
        self.conn.as_ref().expect("a lent connection")
    }
}

impl DerefMut for Lent<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.conn.as_mut().expect("a lent connection")
    }
}

impl Drop for Lent<'_> {
    /// Not finished (its statement's future was dropped mid-way, or `finish` was never
    /// reached): the connection may be anywhere in the protocol, so it goes back to the pool,
    /// whose test settles it, and is never kept.
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if self.is_kept {
                self.kept.lock().count -= 1;
            }
            drop(conn);
        }
    }
}

impl Drop for Inner {
    /// Outside a runtime (the last store dropped after its runtime ended) sqlx cannot spawn the
    /// task that gives a connection back; the connections are then detached and closed with the
    /// socket instead, releasing their place in the pool.
    fn drop(&mut self) {
        if tokio::runtime::Handle::try_current().is_err() {
            let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
            for keeper in state.free.drain(..) {
                drop(keeper.conn.detach());
            }
        }
    }
}

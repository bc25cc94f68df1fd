//! A few of a pool's connections kept out of it between statements, so a statement does not pay
//! sqlx's test when a connection is given back.
//!
//! sqlx tests every connection given back to its pool with a round trip before anyone else may
//! take it: that test is what puts only a live connection, in a known protocol state, back in
//! the pool. On a job's path it was one round trip per statement on the state database and one
//! per datasource read on a source. A connection kept here stays checked out of the pool (a
//! `PoolConnection` held, never dropped between statements), so no test runs; it still counts
//! in the pool's size, so `max_connections` holds.
//!
//! The rules, each keeping what the pool's own test gave:
//! - A connection is kept only after its statements succeeded. On any error, and when its
//!   holder is dropped before they finished (a cancelled future may leave it mid-way through
//!   the protocol), it goes back to the pool, whose test then decides (a dead or confused
//!   connection is closed, never kept or lent).
//! - Idle longer than [`TEST_AFTER_IDLE`], the rule the pools test a connection by before
//!   lending it, a kept connection goes back to the pool (and through its test) instead of
//!   being used: at the next lend, or by a background sweep. A server restart is caught as for
//!   a pooled connection: within the untested second a statement may fail, after it the
//!   connection is tested before any statement sees it.
//! - Out of the pool for more than [`KEPT_OUT`] in all, it goes back after its next use, so
//!   the pool's `max_lifetime` and its other checks still apply.
//! - At most [`Cap`] of the pool's connections are kept: half when the pool has other users
//!   that take connections from it directly (they always have the other half; a pool of one
//!   connection keeps none, the one kept would starve them), all of them when every user
//!   lends through the set. When no kept connection is free, a lend takes one from the pool,
//!   and keeps it afterwards if there is room. While a lend waits on the pool, a connection
//!   whose use ends goes back to the pool instead of being kept (through its test, the pool
//!   hands it to a waiter): a kept connection never reaches the pool's waiters otherwise, so a
//!   lend on a pool whose every connection is kept would wait for the idle sweep, or under
//!   load, where each is reused within the second, until the pool's acquire timeout.
//! - When the pool closes (`Pool::close`, which waits for every checked-out connection, or
//!   [`Kept::close`], which closes it), the kept connections go back at once and no more are
//!   kept.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{Database, Pool};

use crate::TEST_AFTER_IDLE;

/// How long a connection may stay out of the pool in all before it goes back after its next
/// use.
pub const KEPT_OUT: Duration = Duration::from_secs(60);

/// How long past a connection's idle second the sweep wakes for it.
const SWEEP_SLACK: Duration = Duration::from_millis(5);

/// How many of a pool's connections may be kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    /// Half (rounded down): the pool has users that take connections from it directly.
    Half,
    /// All: every user of the pool lends through the set.
    All,
}

/// The kept connections of one pool; clones share them.
#[derive(Debug)]
pub struct Kept<DB: Database>(Arc<Inner<DB>>);

impl<DB: Database> Clone for Kept<DB> {
    fn clone(&self) -> Self {
        Kept(self.0.clone())
    }
}

#[derive(Debug)]
struct Inner<DB: Database> {
    pool: Pool<DB>,
    /// At most this many connections kept (free or lent).
    cap: usize,
    state: Mutex<State<DB>>,
}

#[derive(Debug)]
struct State<DB: Database> {
    /// The kept connections not lent, the most recently used last.
    free: Vec<Keeper<DB>>,
    /// Kept connections, free or lent.
    count: usize,
    /// Lends waiting on the pool: while any is, no connection is kept.
    waiting: usize,
    /// A sweep task runs (it does while `free` is not empty).
    sweeping: bool,
    /// [`Kept::close`] was called: nothing more is kept.
    closed: bool,
}

#[derive(Debug)]
struct Keeper<DB: Database> {
    conn: PoolConnection<DB>,
    /// When it was taken from the pool.
    out_since: Instant,
    /// When its last use ended.
    used_at: Instant,
}

/// A connection lent for some statements: a kept one, or one taken from the pool. Call
/// [`Lent::finish`] with how they went; dropped without it, the connection goes back to the
/// pool.
#[derive(Debug)]
pub struct Lent<DB: Database> {
    kept: Arc<Inner<DB>>,
    conn: Option<PoolConnection<DB>>,
    out_since: Instant,
    /// It is one of the kept connections (counted in `State::count`).
    is_kept: bool,
}

impl<DB: Database> Kept<DB> {
    /// Keeps up to `cap` of `pool`'s connections.
    pub fn new(pool: Pool<DB>, cap: Cap) -> Kept<DB> {
        let max = pool.options().get_max_connections();
        let cap = match cap {
            Cap::Half => max / 2,
            Cap::All => max,
        };
        Kept(Arc::new(Inner {
            cap: usize::try_from(cap).unwrap_or(usize::MAX),
            pool,
            state: Mutex::new(State {
                free: Vec::new(),
                count: 0,
                waiting: 0,
                sweeping: false,
                closed: false,
            }),
        }))
    }

    /// A connection: the most recently used kept one that has not been idle longer than
    /// [`TEST_AFTER_IDLE`], or else one from the pool.
    pub async fn lend(&self) -> Result<Lent<DB>, sqlx::Error> {
        let inner = &self.0;
        let (keeper, stale) = {
            let mut state = inner.lock();
            let now = Instant::now();
            let stale = if state.closed || inner.pool.is_closed() {
                state.drain()
            } else {
                state.stale(now)
            };
            let keeper = state.free.pop();
            if keeper.is_none() {
                // Counted in the same look, so a use ending from now on gives its connection
                // back to the pool, where this lend waits.
                state.waiting += 1;
            }
            (keeper, stale)
        };
        // Each goes back to the pool, through its test.
        drop(stale);
        if let Some(keeper) = keeper {
            return Ok(Lent {
                kept: inner.clone(),
                conn: Some(keeper.conn),
                out_since: keeper.out_since,
                is_kept: true,
            });
        }
        let waiting = Waiting(inner);
        let conn = inner.pool.acquire().await;
        drop(waiting);
        Ok(Lent {
            kept: inner.clone(),
            conn: Some(conn?),
            out_since: Instant::now(),
            is_kept: false,
        })
    }

    /// How many connections are kept, free or lent.
    pub fn kept(&self) -> usize {
        self.0.lock().count
    }

    /// How many lends wait on the pool.
    pub fn waiting(&self) -> usize {
        self.0.lock().waiting
    }

    /// Gives every kept connection back to the pool, keeps no more, and closes the pool: waits
    /// until every connection still lent is given back too. (The pool's own `close` also ends,
    /// the sweep giving the kept connections back the moment it starts; this says it first.)
    pub async fn close(&self) {
        let drained = {
            let mut state = self.0.lock();
            state.closed = true;
            state.drain()
        };
        drop(drained);
        self.0.pool.close().await;
    }
}

impl<DB: Database> Inner<DB> {
    fn lock(&self) -> MutexGuard<'_, State<DB>> {
        // The state stays consistent under a panic: every change is a few plain assignments.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `conn` after its statements succeeded, or gives it back; `true` when it was kept
    /// and no sweep runs: the caller starts one.
    fn settle(
        &self,
        conn: PoolConnection<DB>,
        out_since: Instant,
        is_kept: bool,
        succeeded: bool,
    ) -> bool {
        let now = Instant::now();
        let mut state = self.lock();
        let keep = succeeded
            && state.waiting == 0
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
            .map(|k| k.used_at + TEST_AFTER_IDLE + SWEEP_SLACK)
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

/// A lend waiting on the pool, counted until it has its connection or is dropped.
struct Waiting<'a, DB: Database>(&'a Inner<DB>);

impl<DB: Database> Drop for Waiting<'_, DB> {
    fn drop(&mut self) {
        self.0.lock().waiting -= 1;
    }
}

impl<DB: Database> State<DB> {
    /// Takes the free connections idle longer than [`TEST_AFTER_IDLE`] out of the set.
    fn stale(&mut self, now: Instant) -> Vec<Keeper<DB>> {
        let stale: Vec<Keeper<DB>> = self
            .free
            .extract_if(.., |k| {
                now.saturating_duration_since(k.used_at) > TEST_AFTER_IDLE
            })
            .collect();
        self.count -= stale.len();
        stale
    }

    /// Takes every free connection out of the set.
    fn drain(&mut self) -> Vec<Keeper<DB>> {
        let drained = std::mem::take(&mut self.free);
        self.count -= drained.len();
        drained
    }
}

/// Sweeps `kept`'s idle connections back to the pool while it has any, and all of them the
/// moment the pool closes (`Pool::close` would otherwise wait for them for ever). It holds the
/// set weakly: once every handle is gone, the set and its connections are dropped.
fn spawn_sweep<DB: Database>(kept: &Arc<Inner<DB>>) {
    let weak: Weak<Inner<DB>> = Arc::downgrade(kept);
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

impl<DB: Database> Lent<DB> {
    /// Ends the use: when `succeeded` the connection is kept (or stays kept) if the rules allow,
    /// else it goes back to the pool.
    pub fn finish(mut self, succeeded: bool) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        if self
            .kept
            .settle(conn, self.out_since, self.is_kept, succeeded)
        {
            spawn_sweep(&self.kept);
        }
    }

    /// Takes the connection out of the pool for good (it may be mid-statement: it must never
    /// be lent again), freeing its place in the pool; closing it is the caller's.
    pub fn detach(mut self) -> Option<DB::Connection> {
        self.take().map(PoolConnection::detach)
    }

    /// The connection, out of the set for good: no longer counted as kept.
    fn take(&mut self) -> Option<PoolConnection<DB>> {
        let conn = self.conn.take()?;
        if self.is_kept {
            self.kept.lock().count -= 1;
        }
        Some(conn)
    }
}

impl<DB: Database> Deref for Lent<DB> {
    type Target = DB::Connection;

    fn deref(&self) -> &DB::Connection {
        // Present until `finish`, `detach` or `drop` takes it, and none hands `self` out again.
        self.conn.as_ref().expect("a lent connection")
    }
}

impl<DB: Database> DerefMut for Lent<DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        self.conn.as_mut().expect("a lent connection")
    }
}

impl<DB: Database> Drop for Lent<DB> {
    /// Not finished (its statement's future was dropped mid-way, or `finish` was never
    /// reached): the connection may be anywhere in the protocol, so it goes back to the pool,
    /// whose test settles it, and is never kept.
    fn drop(&mut self) {
        drop(self.take());
    }
}

impl<DB: Database> Drop for Inner<DB> {
    /// Outside a runtime (the last handle dropped after its runtime ended) sqlx cannot spawn
    /// the task that gives a connection back; the connections are then detached and closed
    /// with the socket instead, releasing their place in the pool.
    fn drop(&mut self) {
        if tokio::runtime::Handle::try_current().is_err() {
            let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
            for keeper in state.free.drain(..) {
                drop(keeper.conn.detach());
            }
        }
    }
}

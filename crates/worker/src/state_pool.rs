//! The state database's connection pool, and when it tests a connection before lending it.
//!
//! sqlx tests a pooled connection with a round trip (a bare `Sync`, answered `ReadyForQuery`)
//! twice per use by default: when it is given back and again when it is taken. A job takes a
//! connection four times (the claim, the fence before the object is published, the terminal
//! record, the event marked published), so the second test alone was four round trips per job
//! on the state database, each a wake-up and a few system calls on both sides.
//!
//! The test when it is given back stays (sqlx always makes it, and it is what puts a
//! connection back in the pool only if it answered). The test when it is taken is made only
//! for a connection idle longer than [`TEST_AFTER_IDLE`]: one that answered that recently is
//! almost always still there, and under load, where the round trips cost, connections are idle
//! for milliseconds. A connection that died in between (the server restarted within that
//! second) fails its statement with an error the job core treats as an unavailable state
//! database, as it would treat the server going away mid-statement: the message is requeued
//! and the job runs again (never failed for it); the pool drops the dead connection when it is
//! given back (its test fails), so the retry gets a live one. The pool's other users meet such
//! a connection the same way: the repair pass, the sweeper and retention try again on their
//! next tick, and a control API request answers 503 `state_database_unavailable` ("try
//! again"). A connection idle through a restart of more than a second is tested and replaced
//! before any statement sees it.
//!
//! The job path's statements (the claim, the lease renewal that also fences the publishing of
//! an object, the claimed terminal record, the event marked published) pay neither test: they
//! run on a few connections the store keeps out of the pool between statements
//! ([`sqlpool::Kept`]), so a warm job makes no ping at all. The same rules hold there: at most
//! half the pool is kept, so its other users always have the rest; a connection goes back to
//! the pool (through its test) after any error or a cancelled statement, after
//! [`TEST_AFTER_IDLE`] idle, and after [`sqlpool::KEPT_OUT`] out of the pool, so the pool's own
//! limits still apply. At shutdown [`outbox::Store::close`] gives them back before closing the
//! pool (a bare `close` of the pool gives them back too, the moment it starts).

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

/// How long a connection may sit idle in the pool and still be lent without a round trip to
/// test it first: the sources' pools' rule too.
pub use sqlpool::TEST_AFTER_IDLE;

/// How long a statement waits for a connection when all `max_connections` are in use.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// The state database's pool: at most `max_connections`, connected lazily (the Worker starts
/// and waits for the database itself), each connection tested when taken only after
/// [`TEST_AFTER_IDLE`] idle.
pub fn connect_lazy(options: PgConnectOptions, max_connections: u32) -> PgPool {
    sqlpool::tested_after_idle(
        PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(ACQUIRE_TIMEOUT),
    )
    .connect_lazy_with(options)
}

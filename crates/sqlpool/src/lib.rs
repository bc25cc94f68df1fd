//! The Worker's sqlx pools, the state database's and each source's, on one set of rules.
//!
//! sqlx tests a pooled connection with a round trip (a bare `Sync` on PostgreSQL, `COM_PING` on
//! MySQL) when it is given back (always) and, by default, again when it is taken. On a job's
//! path both tests are round trips the job waits for or pays for, each a wake-up and a few
//! system calls on both sides:
//! - `idle.rs`: the test when taken, made only after [`TEST_AFTER_IDLE`] idle
//!   ([`tested_after_idle`]);
//! - `kept.rs`: a few connections kept out of the pool between statements ([`Kept`]), so none
//!   is tested when given back; after the same second idle a kept connection goes back to the
//!   pool, through its test.

mod idle;
mod kept;

pub use idle::{tested_after_idle, TEST_AFTER_IDLE};
pub use kept::{Cap, Kept, Lent, KEPT_OUT};

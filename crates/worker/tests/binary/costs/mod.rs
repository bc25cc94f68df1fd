//! What a job costs the servers it talks to, counted rather than timed, so a change that makes
//! a job dearer fails a test instead of a benchmark no one reran.
//!
//! - [`round_trips`]: the statements and round trips one small job makes on the state database
//!   and on its source (PostgreSQL, MariaDB).
//! - [`burst`]: a burst of jobs at once, whose published marks share statements.
//! - [`dead_connections`]: what the pings left out cost when pooled connections die: never a
//!   job.
//! - [`manager_commands`]: the commands one small job sends to the Manager's MongoDB in the
//!   Manager mode.

mod burst;
mod dead_connections;
mod manager_commands;
mod round_trips;

//! The security suite: one test per finding of the attacker's review (issue 10), each against
//! the real `fetcher-worker` binary and the real servers, plus the hostile-size cases with the
//! Worker's memory read from `/proc`. SECURITY.md states what each defence covers.

mod bodies;
mod memory;

mod datasource;
mod health;
mod job_id_header;
mod legacy;
mod logs;
mod oversized;
mod sizes;
mod tenant;

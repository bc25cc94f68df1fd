//! The security suite: one test per finding of the attacker's review (issue 10), each against
//! the real `fetcher-worker` binary and the real servers, plus the hostile-size cases with the
//! Worker's memory read from `/proc`. SECURITY.md states what each defence covers.

#[path = "../e2e/harness.rs"]
mod harness;
#[path = "../hostile/support.rs"]
#[allow(dead_code, unused_imports)]
mod support;

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

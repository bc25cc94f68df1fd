//! Test support shared by the workspace's integration tests. **For tests only**: crates take it
//! as a `[dev-dependencies]` entry, never as a normal dependency, and it is never published.
//!
//! Every helper works against the real local servers (`scripts/services.sh` brings them up) and
//! gives each test its own resources, named with a random suffix, removed at the test's end; a
//! test that panics first removes them from `Drop`, on a thread of its own. A server that cannot
//! be reached fails the test with a message saying what to start: tests never skip a missing
//! dependency.
//!
//! # Layout
//!
//! - [`pg`]: [`pg::TestDb`], a fresh PostgreSQL database per test (`TEST_DATABASE_URL`),
//!   empty or brought to the Worker's schema.
//! - [`amqp`]: [`amqp::Broker`], a test-side RabbitMQ connection (`TEST_AMQP_URI`) that
//!   declares, binds, consumes and cleans up; received-header accessors; `rabbitmqctl` for the
//!   tests that stop the local broker.
//! - [`mqtt`]: the local Mosquitto (`TEST_MQTT_URL`), a `mosquitto_sub` subscriber, and a
//!   private Mosquitto a test may stop and start.
//! - [`metrics`]: what the code under test recorded, read back from a thread-local recorder.
//! - [`cleanup`]: the cleanup a test resource runs from `Drop` after a panic.
//! - [`sqlbridge`]: [`sqlbridge::SqlBridge`], a private pysqlbridge (the SQL Server stand-in)
//!   per test, serving the test's JSON tables.
//! - [`mariadb`]: [`mariadb::MariaDb`], a fresh database per test on the MySQL/MariaDB test
//!   server (`TEST_MYSQL_URL`).
//! - [`mongo`]: [`mongo::MongoDb`], a fresh database per test on the MongoDB test server
//!   (`TEST_MONGO_URL`), and the server's open cursors on it.
//! - [`secantus`]: [`secantus::PrivateSecantus`], a private secantusdb a test may stop
//!   (SIGTERM or SIGKILL) and start again on the same data.
//! - [`proxy`]: [`proxy::FaultProxy`], a TCP proxy in front of a dependency whose faults a
//!   test switches at run time (latency, stall, refuse, reset, cuts, and traps aimed at one
//!   step of a protocol).
//! - [`manager`]: [`manager::Manager`], a stand-in for the Go Manager of a Fetcher deployment:
//!   its job indexes and documents in MongoDB, and a job read back as its `GET` reads it.
//! - [`wide_table`]: the benchmarks' eight-column PostgreSQL table, generated server-side.
//!
//! # Dependencies
//!
//! `sqlx`, `lapin`, `mongodb`, `tokio`/`tokio-util`, `metrics`/`metrics-util`, `serde_json`
//! and `schema` (the embedded migrations) only; MQTT through the distribution's `mosquitto`
//! programs. Never
//! `worker`, and nothing of the domain: the fixtures (jobs, events, stores) stay in each crate's
//! `tests/` support module, on top of this crate.

pub mod amqp;
pub mod cleanup;
pub mod manager;
pub mod mariadb;
pub mod metrics;
pub mod mongo;
pub mod mqtt;
pub mod pg;
pub mod proxy;
pub mod secantus;
pub mod sqlbridge;
pub mod wide_table;

/// A local TCP port nothing listens on, never the same twice in one test process: a port the
/// OS reports free stays free only until someone binds it, and two servers started by one test
/// (a private broker and a Worker) could otherwise be handed the same port before either bound
/// it.
pub fn free_port() -> u16 {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static HANDED_OUT: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    let handed_out = HANDED_OUT.get_or_init(|| Mutex::new(HashSet::new()));
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut taken = handed_out.lock().unwrap_or_else(|e| e.into_inner());
        if taken.insert(port) {
            return port;
        }
    }
}

//! What every suite of this binary runs on: one isolated world per test (state and source
//! databases, bucket, work queue, events exchange, master key), the Worker process, signed and
//! hostile messages for its work queue, and listeners for its events and dead letters.
//!
//! The servers are testkit's (`testkit::pg`, `testkit::amqp`: `TEST_DATABASE_URL`,
//! `TEST_AMQP_URI`) and the S3 test server (`TEST_S3_ENDPOINT`, `TEST_S3_ACCESS_KEY`,
//! `TEST_S3_SECRET_KEY`, as the storage tests read them); `TEST_WORKER_BIN` runs another build
//! of the Worker, `TEST_LOG` echoes its output.
//!
//! - [`world`]: [`World`], what it creates and removes, and the Worker's environment for it.
//! - [`process`]: [`WorkerProcess`], a running `fetcher-worker` with its output captured.
//! - [`publish`]: signed jobs and messages with typed headers for the work queue.
//! - [`listener`]: [`listener::Listener`] and [`Event`], the Worker's events as a consumer receives them.
//! - [`control`]: [`ControlClient`], signed (or not) requests to the control API.
//! - [`dead_letters`]: [`DeadLetters`], a test run's own dead letters on the shared exchange.
//! - [`http`]: GETs on the health port (also from another local address), and Prometheus samples.
//! - [`FaultProxy`] and [`Trap`]: testkit's TCP fault proxy (`testkit::proxy`), in front of a
//!   dependency whose faults a test switches (latency, stall, refuse, reset, cuts and traps).
//! - [`s3`]: the S3 test server: the bucket of a world, and a client behind the Worker's back.
//! - [`sources`]: source databases of every kind (MongoDB, MariaDB, PostgreSQL), one per test,
//!   as the Worker's datasources.
//! - [`results`]: a job's outcome as a consumer checks it (result opened, or failure message).
//! - [`golden`]: a result's bytes checked against a golden file under `e2e/fixtures/`.
//! - [`overlap`]: [`Overlap`], the most reads of a slow view the source ran at once, sampled
//!   while jobs run (what a datasource's concurrency cap holds down).
//! - [`statements`]: [`StatementCounter`], a proxy that counts the statements and round trips
//!   a job makes on PostgreSQL or MariaDB.

mod control;
mod dead_letters;
mod golden;
mod http;
mod listener;
mod manager_outbox;
mod overlap;
mod process;
mod publish;
mod results;
mod s3;
pub mod sources;
mod statements;
mod world;

pub use control::{ControlClient, Signing};
pub use dead_letters::DeadLetters;
pub use golden::assert_golden;
pub use http::{connect_from, http_get, http_get_from, metric_sum};
pub use listener::{Event, Listener};
pub use manager_outbox::{terminal_event_published, wait_terminal_event_published};
pub use overlap::Overlap;
pub use process::{free_port, WorkerProcess};
pub use publish::{publish, signed, work_route, Headers, RUN_HEADER};
pub use s3::s3_client;
pub use statements::{Protocol, StatementCounter, Tally};
pub use testkit::proxy::{FaultProxy, Trap};
pub use world::{World, SOURCE};

//! The Fetcher Worker service: configuration, the job consumer and pipeline, object storage,
//! health and metrics, and graceful drain. `main.rs` only starts it.
//!
//! # Layout
//! - [`command`]: the command line (`run`, `--help`, `--version`, `config ...`);
//!   [`build_info`]: the version, git revision and build date.
//! - [`config`]: settings from the environment, every problem reported at once.
//! - [`startup`]: [`startup::Application`]: wiring, the run, the drain; [`state_pool`]: the
//!   state database's pool, and when it tests a connection before lending it.
//! - [`dependencies`]: waiting at start for PostgreSQL, RabbitMQ and S3 to answer; `probes`:
//!   each one's probe, which tells a refusal (stop, say what to fix) from no answer (wait).
//! - [`amqp`]: the work queue's topology, headers and consumer.
//! - [`job`]: one delivery to its terminal outcome, over small traits; the sweeper of lost jobs.
//! - [`adapters`]: those traits on PostgreSQL, S3, RabbitMQ and the engine;
//!   [`adapters_manager`]: the state and events on the Manager's MongoDB instead.
//! - [`api`]: the control API (cancel, delete, the job document); [`cancels`]: its
//!   announcements, heard by the replica that runs the job.
//! - [`retention`]: deleting old results through the lifecycle, pruning ended jobs' rows.
//! - [`health`], [`checks`]: `/health`, `/readyz`, `/metrics`; [`http_server`]: the bounded
//!   listener both servers run on.
//! - [`metrics`]: metric names and helpers. [`telemetry`]: logs. [`traces`]: OTLP spans. [`shutdown`]: the signal.
//!
//! This crate wires the libraries together; it is the only one that knows every dependency.

pub mod adapters;
pub mod adapters_manager;
pub mod amqp;
pub mod api;
pub mod build_info;
pub mod cancels;
pub mod checks;
pub mod command;
pub mod config;
pub mod dependencies;
pub mod health;
pub mod http_server;
pub mod job;
pub mod manager_state;
pub mod metrics;
pub(crate) mod probes;
pub mod retention;
pub mod shutdown;
pub mod startup;
pub mod state_pool;
pub mod telemetry;
pub mod traces;

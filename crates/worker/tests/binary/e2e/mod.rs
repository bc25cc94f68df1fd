//! End-to-end tests: the built `fetcher-worker` binary against real RabbitMQ, PostgreSQL and
//! S3 (s3s-fs), driven as an operator and a consumer would.

mod consume;
mod control;
mod datasources;
mod delivery;
mod executions;
mod failures;
mod lifecycle;
mod mirror;
mod settings;
mod topology;
mod world;

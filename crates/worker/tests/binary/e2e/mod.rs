//! End-to-end tests: the built `fetcher-worker` binary against real RabbitMQ, PostgreSQL and
//! S3 (s3s-fs), and a private pysqlbridge for the SQL Server job, driven as an operator and a
//! consumer would.

mod consume;
mod control;
mod datasources;
mod delivery;
mod executions;
mod failures;
mod lifecycle;
mod mirror;
mod settings;
mod sqlserver;
mod startup;
mod streaming;
mod topology;
mod world;

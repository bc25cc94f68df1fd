//! End-to-end tests: the built `fetcher-worker` binary against real RabbitMQ, PostgreSQL and
//! S3 (s3s-fs), and a private pysqlbridge for the SQL Server job, driven as an operator and a
//! consumer would.

mod cancel_first;
mod caps;
mod command_line;
mod consume;
mod control;
mod datasources;
mod delivery;
mod executions;
mod failures;
mod find_jobs;
mod lifecycle;
mod manager;
mod manager_caps;
mod manager_control;
mod manager_mirror;
mod mirror;
mod provisioned;
mod requeues;
mod retention;
mod retries;
mod settings;
mod spill;
mod sqlserver;
mod startup;
mod streaming;
mod topology;
mod traces;
mod vhost;
mod world;

//! Shared integration-test helpers: a fresh database per test on the real local PostgreSQL
//! ([`TestDb`], from `testkit`), the same on MySQL/MariaDB ([`mysql`]), and engines over them
//! ([`harness`]).
//!
//! The server is `TEST_DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/postgres`
//! (what `scripts/services.sh postgres` provides). A server that cannot be reached fails the
//! test with a message saying so: tests never skip a missing dependency.

// Each test binary includes this module and uses a part of it.
#![allow(dead_code, unused_imports)]

pub mod harness;
pub mod mongo;
pub mod mysql;
pub mod sqlserver;

pub use testkit::pg::{admin_url, TestDb, DEFAULT_DATABASE_URL};

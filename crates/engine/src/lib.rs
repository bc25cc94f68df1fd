//! The extraction engine: turns a job's `mappedFields` and `filters` into rows from real
//! databases, written as the Go-compatible result JSON (contract §6).
//!
//! # Layout
//! - [`connection`]: connection names resolved from `DATASOURCE_<NAME>_*` variables and the
//!   state database's `connections` table.
//! - [`catalog`]: tables and columns a datasource holds, and how each column's values map.
//! - [`plan`]: validation of tables, fields, filters and limits against a catalog (pure).
//! - [`error`]: [`EngineError`], with redaction-safe texts.
//! - [`like`]: a contract `like` pattern as an anchored, escaped regular expression, for the
//!   MongoDB datasource.
//! - [`plugin_crm`]: upstream's CRM path's pure rules (which datasource it is, its filters'
//!   `search.*` rewrite with hashed values, when rows are decrypted); its MongoDB reads are to
//!   come with the MongoDB datasource (issue 15).
//! - the private `mongo` module: MongoDB datasources (collections, document paths, BSON values).
//! - [`admission`]: what the engine waits on before each datasource's read (the caller's
//!   concurrency caps).
//! - [`watch`]: what an extraction tells its caller about each datasource, and its graceful
//!   stop.
//! - the private `retry` and `transient` modules: a datasource whose attempt failed
//!   transiently (per driver) is read again (`JOB_RETRY_ATTEMPTS`), with capped exponential
//!   backoff and full jitter, while nothing of the failed attempt left the engine.
//!
//! Every query names its table with the schema the catalog found it in; PostgreSQL sessions
//! run with `search_path = pg_catalog, pg_temp` and read-only transactions, and each
//! datasource's rows are read read-only: a lone table by one statement read-only by itself, several
//! in `START TRANSACTION READ ONLY` (the private `datasource` module). A `prefer` connection with a
//! password is probed first and refused if its server would take the password in the clear
//! (the private `cleartext` module).
//!
//! The engine knows datasources only: it must not depend on `lapin`, `aws-sdk-*`, `axum` or the
//! `outbox` crate (a test checks the dependency tree).

pub mod admission;
mod cancel;
pub mod catalog;
mod cleartext;
pub mod config;
pub mod connection;
mod datasource;
mod engine;
pub mod error;
pub mod like;
mod mongo;
mod mysql;
pub mod plan;
pub mod plugin_crm;
mod pools;
mod postgres;
pub mod result;
mod retry;
pub mod sql;
mod sqlserver;
mod transient;
pub mod watch;

pub use admission::{Admission, Permit, Unlimited};
pub use config::EngineConfig;
pub use engine::{Engine, TimeLimit, OUTPUT_CHUNKS};
pub use error::{EngineError, Result};
pub use result::{probe_spill_dir, Chunks, Extracted, Extraction, SpillStats};
pub use retry::RetryPolicy;
pub use watch::{DatasourceEnd, Observer, Retry, Watch};

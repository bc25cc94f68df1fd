//! The Fetcher Worker service: configuration, the job consumer and pipeline, object storage,
//! health and metrics, and graceful drain. `main.rs` only starts it.
//!
//! # Layout
//! - [`storage`]: sealed results in S3-compatible object storage (contract §7).
//!
//! This crate wires the libraries together; it is the only one that knows every dependency.

pub mod storage;

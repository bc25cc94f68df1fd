//! The Fetcher Worker's wire contract, as pure code: no I/O, no network, no clock it does not
//! receive as an argument.
//!
//! # Layout
//! - [`json`]: a Go-compatible JSON writer (`encoding/json` `Marshal` / `MarshalIndent` bytes),
//!   streaming into any `std::io::Write`.
//!
//! This crate must not depend on any other crate of the workspace, nor on any I/O crate
//! (`tokio`, `lapin`, `sqlx`, `aws-sdk-*`, `axum`).

pub mod json;

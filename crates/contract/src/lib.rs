//! The Fetcher Worker's wire contract, as pure code: no I/O, no network, no clock it does not
//! receive as an argument.
//!
//! # Layout
//! - [`event`]: terminal job events: body builder, CloudEvents attributes, the ce-id rule.
//! - [`lifecycle`]: job and execution statuses, the job state machine (lifecycle §1, §3).
//! - [`json`]: a Go-compatible JSON writer (`encoding/json` `Marshal` / `MarshalIndent` bytes),
//!   streaming into any `std::io::Write`.
//! - [`envelope`]: what a signature covers (contract §3), signing and verification.
//! - [`dead_letter`]: what the Worker's stamp on a dead letter covers, signing and verification.
//! - [`redaction`]: error redaction before an error text leaves the process.
//! - [`message`]: inbound job messages, decoded with Go's rules and validated; job id recovery.
//! - [`wire`]: header and queue names shared by the Worker and `fetcherctl`.
//!
//! This crate must not depend on any other crate of the workspace, nor on any I/O crate
//! (`tokio`, `lapin`, `sqlx`, `aws-sdk-*`, `axum`).

pub mod dead_letter;
pub mod envelope;
pub mod event;
pub mod json;
pub mod lifecycle;
pub mod message;
mod node;
pub mod redaction;
pub mod wire;

pub use message::{JobMessage, MessageError};
pub use redaction::{redact, Redacted};

//! Sealed results in S3-compatible object storage (contract §2, §7).
//!
//! - [`config`]: [`StorageConfig`], filled by the Worker's configuration module.
//! - [`key`]: [`object_key`], the key rule (`prefix + [tenant/] + external-data/<jobId>.json`).
//! - [`store`]: [`ObjectStore`], the SDK client wrapped as a service (put, get, a streamed get
//!   ([`ObjectBody`]), delete, exists, readiness); its multipart upload lives in `multipart`.
//! - `upload`: [`Upload`], a body streamed into the store part by part and published only after
//!   the caller's last check ([`ObjectStore::upload`]); `part_buffer`: [`PartBuffer`], the part
//!   being filled, lent to a producer that appends to it in place.
//! - `direct_put`: `DirectPut`, a single PutObject sent through hyper, signed by the SDK's SigV4
//!   signer at the URL its endpoint rules give, without the SDK's per-request orchestration.
//! - [`error`]: [`StorageError`], named after the failed step, with `is_retriable`; `scrubber`
//!   takes credentials and the endpoint's host out of every SDK error text.

mod checksum;
pub mod config;
mod direct_put;
pub mod error;
pub mod key;
mod multipart;
mod part_buffer;
pub mod retry;
mod scrubber;
pub mod store;
mod upload;

pub use config::{StaticCredentials, StorageConfig};
pub use error::{Cause, StorageError};
pub use key::{object_key, ObjectKey};
pub use part_buffer::PartBuffer;
pub use retry::{NoRetry, RetryPolicy};
pub use store::{ObjectBody, ObjectStore};
pub use upload::Upload;

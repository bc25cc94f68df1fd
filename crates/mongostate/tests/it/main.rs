//! The crate against the MongoDB test server (secantusdb), a private database per test.

mod connections;
mod jobs;
mod manager_store;
mod outbox;

//! The crate against the MongoDB test server (secantusdb), a private database per test.

mod connections;
mod durability;
mod jobs;
mod manager_claims;
mod manager_control;
mod manager_ends;
mod manager_mirror;
mod manager_slots;
mod manager_store;
mod manager_world;
mod outbox;

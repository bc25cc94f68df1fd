//! Proof under hostile input: the real `fetcher-worker` binary fed a flood of malformed, forged,
//! replayed and injection-laden messages, and searched for every secret it was given.

#[path = "../e2e/harness.rs"]
mod harness;
mod support;

mod corpus;
mod drain;

mod flood;
mod mariadb_user;
mod poison;
mod replay;
mod secret_values;
mod secrets;

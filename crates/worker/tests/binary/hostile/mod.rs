//! Proof under hostile input: the real `fetcher-worker` binary fed a flood of malformed, forged,
//! replayed and injection-laden messages, and searched for every secret it was given.

mod corpus;
mod mariadb_user;
mod secret_values;
mod support;

mod drain;
mod flood;
mod poison;
mod replay;
mod secrets;

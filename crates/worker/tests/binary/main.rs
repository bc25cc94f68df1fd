//! The built `fetcher-worker` binary against the real servers (RabbitMQ, PostgreSQL, MariaDB,
//! S3), one integration-test binary for every suite that runs it:
//!
//! - [`e2e`]: end to end, driven as an operator and a consumer would;
//! - [`hostile`]: hostile input (malformed, forged, replayed, injection-laden messages) and a
//!   search of everything the Worker wrote for every secret it was given;
//! - [`security`]: one test per finding of the attacker's review, and the hostile sizes;
//! - [`chaos`]: cuts at chosen points through fault proxies, and the `#[ignore]`d soak;
//! - [`deploy`]: the deploy kit's dashboard and alert rules against Prometheus scraping the
//!   Worker, and docs/metrics.md's metrics on `/metrics`;
//! - [`costs`]: what one job costs the servers, counted (statements and round trips);
//! - [`bench`]: `#[ignore]`d benchmarks of the binary (`make bench`).
//!
//! [`harness`] is what they run on, built on `testkit`. A suite alone:
//! `cargo test -p worker --test binary -- e2e::` (or `hostile::`, `security::`, `chaos::`, `deploy::`, `costs::`).

mod harness;

mod bench;
mod chaos;
mod costs;
mod deploy;
mod e2e;
mod hostile;
mod security;

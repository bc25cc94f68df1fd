//! What build this is: the crate's version, and the git revision and UTC build date `build.rs`
//! found; `--version`, the start log line, `/readyz` and `fetcher_worker_build_info` say them.

/// The crate's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The short git revision built, `unknown` outside a git checkout.
pub const REVISION: &str = env!("FETCHER_WORKER_REVISION");
/// The UTC date of the build, `YYYY-MM-DD`.
pub const BUILD_DATE: &str = env!("FETCHER_WORKER_BUILD_DATE");

/// `fetcher-worker 0.1.0 (revision 1a2b3c4, built 2026-12-04)`.
pub fn version_line() -> String {
    format!("fetcher-worker {VERSION} (revision {REVISION}, built {BUILD_DATE})")
}

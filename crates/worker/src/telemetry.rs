//! Logs: human-readable lines by default, JSON lines with `LOG_FORMAT=json`, filtered by
//! `LOG_LEVEL`. Set up once, at start.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter};

use crate::config::LogSettings;

/// Installs the global subscriber. A `LOG_LEVEL` that is not a valid filter falls back to
/// `info` (and says so), rather than leaving the Worker silent.
pub fn init(settings: &LogSettings) {
    let (filter, bad_filter) = match EnvFilter::try_new(&settings.level) {
        Ok(filter) => (filter, false),
        Err(_) => (EnvFilter::new("info"), true),
    };
    let registry = tracing_subscriber::registry().with(filter);
    let installed = if settings.json {
        registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true),
            )
            .try_init()
    } else {
        registry.with(fmt::layer().with_target(false)).try_init()
    };
    if installed.is_ok() && bad_filter {
        tracing::warn!("LOG_LEVEL is not a valid filter; logging at info.");
    }
}

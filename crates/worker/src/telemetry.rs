//! Logs: human-readable lines by default, JSON lines with `LOG_FORMAT=json`, filtered by
//! `LOG_LEVEL`. Set up once, at start.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter};

use crate::config::LogSettings;

/// lapin logs every message the broker returns (an unroutable event) at WARN with its whole
/// body and headers: one event body per line for as long as a binding is missing. The Worker
/// counts them (`events_returned_total`) and keeps the reason on the outbox row instead. A
/// `LOG_LEVEL` that names this target itself wins.
const RETURNED_MESSAGES: &str = "lapin::returned_messages";

/// The filter `LOG_LEVEL` asks for, with lapin's returned-message lines silenced.
fn filter(level: &str) -> Result<EnvFilter, tracing_subscriber::filter::ParseError> {
    let filter = EnvFilter::try_new(level)?;
    if level.contains(RETURNED_MESSAGES) {
        return Ok(filter);
    }
    Ok(filter.add_directive(format!("{RETURNED_MESSAGES}=error").parse()?))
}

/// Installs the global subscriber. A `LOG_LEVEL` that is not a valid filter falls back to
/// `info` (and says so), rather than leaving the Worker silent.
pub fn init(settings: &LogSettings) {
    let (filter, bad_filter) = match filter(&settings.level) {
        Ok(filter) => (filter, false),
        Err(_) => (
            filter("info").unwrap_or_else(|_| EnvFilter::new("info")),
            true,
        ),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returned_messages_are_silenced_unless_asked_for() {
        let quiet = filter("debug").unwrap().to_string();
        assert!(quiet.contains("lapin::returned_messages=error"), "{quiet}");
        let asked = filter("info,lapin::returned_messages=warn")
            .unwrap()
            .to_string();
        assert!(asked.contains("lapin::returned_messages=warn"), "{asked}");
        assert!(!asked.contains("lapin::returned_messages=error"), "{asked}");
        assert!(filter("not a [filter").is_err());
    }
}

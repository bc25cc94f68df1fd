//! Logs: human-readable lines by default, JSON lines with `LOG_FORMAT=json`, filtered by
//! `LOG_LEVEL`. Set up once, at start.

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter};

use tracing_subscriber::Layer as _;

use crate::config::{LogSettings, TraceSettings};
use crate::traces::Traces;

/// lapin logs every message the broker returns (an unroutable event) at WARN with its whole
/// body and headers: one event body per line for as long as a binding is missing. The Worker
/// counts them (`fetcher_events_returned_total`) and keeps the reason on the outbox row instead. A
/// `LOG_LEVEL` that names this target itself wins.
const RETURNED_MESSAGES: &str = "lapin::returned_messages";

/// At trace level the AMQP client logs every frame it sends and receives: the broker password
/// (`Connection.StartOk`, as a byte list) and every message body. These targets stay at debug at
/// most unless `LOG_LEVEL` names them itself.
const FRAME_LOGGERS: [&str; 3] = ["lapin", "amq_protocol", "amq_protocol_tcp"];

/// lapin logs at ERROR every connection it sees close or fail: the broker refusing a login, and
/// the close of the Worker's own clean stop ("invalid channel state: Closing"). The Worker says
/// the same once, where it acts on it, at the level it deserves (the start's refusal, "Lost the
/// work queue; reconnecting.", the event link's warnings), so these targets are off unless
/// `LOG_LEVEL` names them or `lapin` itself.
const CONNECTION_LOGGERS: [&str; 3] = ["lapin::channel", "lapin::channels", "lapin::io_loop"];

/// The filter `LOG_LEVEL` asks for, with lapin's returned-message and connection lines
/// silenced and the AMQP frame logs capped below trace.
fn filter(level: &str) -> Result<EnvFilter, tracing_subscriber::filter::ParseError> {
    let mut filter = EnvFilter::try_new(level)?;
    if !level.contains(RETURNED_MESSAGES) {
        filter = filter.add_directive(format!("{RETURNED_MESSAGES}=error").parse()?);
    }
    let lapin_named = level
        .split(',')
        .any(|directive| directive.split('=').next().unwrap_or_default().trim() == "lapin");
    for target in CONNECTION_LOGGERS {
        if !lapin_named && !names(level, target) {
            filter = filter.add_directive(format!("{target}=off").parse()?);
        }
    }
    if default_is_trace(level) {
        for target in FRAME_LOGGERS {
            if !names(level, target) {
                filter = filter.add_directive(format!("{target}=debug").parse()?);
            }
        }
    }
    Ok(filter)
}

/// Whether the filter's target-less directive enables trace (`trace`, `TRACE`, `debug,trace`).
fn default_is_trace(level: &str) -> bool {
    level
        .split(',')
        .map(str::trim)
        .rfind(|directive| !directive.contains('=') && !directive.contains('['))
        .is_some_and(|default| default.eq_ignore_ascii_case("trace"))
}

/// Whether a directive of the filter names `target` (or one of its modules).
fn names(level: &str, target: &str) -> bool {
    level.split(',').any(|directive| {
        let name = directive.split('=').next().unwrap_or_default().trim();
        name == target || name.starts_with(&format!("{target}::"))
    })
}

/// Installs the global subscriber, with the traces' exporter when `traces` is set (the
/// returned [`Traces`] flushes it at the stop). A `LOG_LEVEL` that is not a valid filter falls
/// back to `info` (and says so), rather than leaving the Worker silent. `LOG_LEVEL` filters the
/// log lines only: the traces keep the Worker's spans whatever it says.
pub fn init(settings: &LogSettings, traces: Option<&TraceSettings>) -> Option<Traces> {
    let (filter, bad_filter) = match filter(&settings.level) {
        Ok(filter) => (filter, false),
        Err(_) => (
            filter("info").unwrap_or_else(|_| EnvFilter::new("info")),
            true,
        ),
    };
    let (exporter, traces_layer, traces_error) = match traces.map(crate::traces::layer) {
        Some(Ok((exporter, layer))) => (Some(exporter), Some(layer), None),
        Some(Err(error)) => (None, None, Some(error)),
        None => (None, None, None),
    };
    let registry = tracing_subscriber::registry().with(traces_layer);
    let installed = if settings.json {
        registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true)
                    .with_filter(filter),
            )
            .try_init()
    } else {
        // Colour codes only for a person at a terminal: a log collector or a file gets plain
        // text.
        let colour = std::io::IsTerminal::is_terminal(&std::io::stdout());
        registry
            .with(
                fmt::layer()
                    .with_target(false)
                    .with_ansi(colour)
                    .with_filter(filter),
            )
            .try_init()
    };
    if installed.is_ok() && bad_filter {
        tracing::warn!("LOG_LEVEL is not a valid filter; logging at info.");
    }
    if let Some(error) = traces_error {
        // The exporter's error names the setting; the headers' values are never in it.
        tracing::warn!(%error, "Traces are off: the OTLP exporter could not be built.");
    }
    exporter
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

    #[test]
    fn lapins_connection_lines_are_off_unless_asked_for() {
        let quiet = filter("info").unwrap().to_string();
        for target in CONNECTION_LOGGERS {
            assert!(quiet.contains(&format!("{target}=off")), "{quiet}");
        }
        let asked = filter("info,lapin=debug").unwrap().to_string();
        assert!(!asked.contains("=off"), "{asked}");
        let one = filter("info,lapin::io_loop=warn").unwrap().to_string();
        assert!(one.contains("lapin::channels=off"), "{one}");
        assert!(!one.contains("lapin::io_loop=off"), "{one}");
    }

    #[test]
    fn amqp_frame_logs_stay_below_trace_unless_named() {
        let capped = filter("trace").unwrap().to_string();
        for target in FRAME_LOGGERS {
            assert!(capped.contains(&format!("{target}=debug")), "{capped}");
        }
        // A lower default needs no cap; a named target keeps what was asked for.
        assert!(!filter("info").unwrap().to_string().contains("lapin=debug"));
        let named = filter("trace,lapin=trace").unwrap().to_string();
        assert!(!named.contains("lapin=debug"), "{named}");
        assert!(named.contains("amq_protocol=debug"), "{named}");
    }
}

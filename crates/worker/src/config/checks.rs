//! Settings the reader takes as text, checked against what the Worker can honour: the log level
//! and format, and every URL's scheme. Each problem names its variable; a secret's value (the
//! state database's URL, a whole `RABBITMQ_URI`) and the object store's endpoint are never
//! repeated.

use std::collections::BTreeMap;
use std::str::FromStr;

use tracing_subscriber::filter::LevelFilter;

/// Every problem of the variables checked here.
pub(super) fn problems(vars: &BTreeMap<String, String>) -> Vec<String> {
    let get = |name: &str| vars.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    [
        get("LOG_LEVEL").and_then(log_level),
        get("LOG_FORMAT").and_then(log_format),
        get("DATABASE_URL").and_then(database_url),
        get("OBJECT_STORAGE_ENDPOINT").and_then(storage_endpoint),
        rabbitmq_uri(get("RABBITMQ_URI")),
        rabbitmq_host(get("RABBITMQ_URI"), get("RABBITMQ_HOST")),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// `LOG_LEVEL`: a `tracing` filter whose every directive is a level or names a target
/// (`target=level`, `target[span]=level`). A bare word that is no level (`verbose`) parses as a
/// target enabled at trace, and silences everything else: refused.
fn log_level(level: &str) -> Option<String> {
    let what = "must be a level (trace, debug, info, warn, error, off) or tracing directives \
                (`info,worker=debug`)";
    let bare = level
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty() && !d.contains('=') && !d.contains('['))
        .find(|d| LevelFilter::from_str(d).is_err());
    if let Some(directive) = bare {
        return Some(format!("LOG_LEVEL {what}: {directive:?} is no level"));
    }
    tracing_subscriber::EnvFilter::try_new(level)
        .err()
        .map(|e| format!("LOG_LEVEL {what}: {e}"))
}

/// `LOG_FORMAT`: `json` or `text`, in any case.
fn log_format(format: &str) -> Option<String> {
    let known = ["json", "text"]
        .iter()
        .any(|f| f.eq_ignore_ascii_case(format));
    (!known).then(|| format!("LOG_FORMAT must be json or text, not {format:?}"))
}

/// `DATABASE_URL`: a PostgreSQL URL the driver takes (it would take `mysql://` too, and then
/// speak PostgreSQL to it).
fn database_url(url: &str) -> Option<String> {
    let postgres = scheme(url).is_some_and(|s| {
        s.eq_ignore_ascii_case("postgres") || s.eq_ignore_ascii_case("postgresql")
    });
    if !postgres {
        return Some(
            "DATABASE_URL must be a postgres:// or postgresql:// URL: the Worker's state \
             database is PostgreSQL"
                .to_owned(),
        );
    }
    sqlx::postgres::PgConnectOptions::from_str(url)
        .is_err()
        .then(|| "DATABASE_URL is not a valid PostgreSQL URL".to_owned())
}

/// `OBJECT_STORAGE_ENDPOINT`: an `http://` or `https://` URL with a host, as the S3 client
/// takes it.
fn storage_endpoint(endpoint: &str) -> Option<String> {
    let usable = (endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        && axum::http::Uri::from_str(endpoint)
            .ok()
            .and_then(|uri| uri.host().map(|host| !host.is_empty()))
            .unwrap_or(false);
    (!usable).then(|| {
        "OBJECT_STORAGE_ENDPOINT must be an http:// or https:// URL with a host".to_owned()
    })
}

/// `RABBITMQ_URI`: the scheme (`amqp`, `amqps`), or a whole URI the AMQP client parses.
fn rabbitmq_uri(uri: Option<&str>) -> Option<String> {
    let uri = uri?;
    if !uri.contains("://") {
        let known = ["amqp", "amqps"]
            .iter()
            .any(|s| s.eq_ignore_ascii_case(uri));
        return (!known).then(|| {
            "RABBITMQ_URI must be amqp or amqps, or a whole amqp:// or amqps:// URI".to_owned()
        });
    }
    // The parser's error quotes the URI, password included: only its verdict is kept.
    let parsed = uri.parse::<lapin::uri::AMQPUri>().is_ok();
    if !parsed {
        return Some("RABBITMQ_URI is not a valid amqp:// or amqps:// URI".to_owned());
    }
    ipv6_host(authority_host(uri)).then(|| {
        "RABBITMQ_URI's host is an IPv6 address, which the AMQP client replaces by localhost: \
         use a host name"
            .to_owned()
    })
}

/// `RABBITMQ_HOST`, when the URI is built from its parts: a host name or address, no URL, no
/// port, nothing the URI would read as another part.
fn rabbitmq_host(uri: Option<&str>, host: Option<&str>) -> Option<String> {
    if uri.is_some_and(|uri| uri.contains("://")) {
        return None;
    }
    let host = host?;
    if host.contains("://") {
        return Some(
            "RABBITMQ_HOST must be a host, not a URL: the scheme goes in RABBITMQ_URI, the port \
             in RABBITMQ_PORT_AMQP"
                .to_owned(),
        );
    }
    if ipv6_host(host) || host.parse::<std::net::Ipv6Addr>().is_ok() {
        return Some(
            "RABBITMQ_HOST is an IPv6 address, which the AMQP client replaces by localhost: use \
             a host name"
                .to_owned(),
        );
    }
    if host.contains(':') {
        return Some(
            "RABBITMQ_HOST must be a host only: the port goes in RABBITMQ_PORT_AMQP".into(),
        );
    }
    let odd = host
        .chars()
        .any(|c| c.is_whitespace() || matches!(c, '/' | '@' | '?' | '#' | '%'));
    odd.then(|| format!("RABBITMQ_HOST must be a host name or address, not {host:?}"))
}

/// A URL's scheme: what precedes `://`, when it is one.
fn scheme(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once("://")?;
    let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(scheme)
}

/// The host part of a URL's authority (after any user info, before any port or path).
fn authority_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
}

/// Whether a host is a bracketed IPv6 literal (`[::1]`, `[fd00::5]:5672`).
fn ipv6_host(host: &str) -> bool {
    host.starts_with('[')
}

/// Tokio's own variable for the async runtime's threads, which its runtime builder would read
/// and panic on when it is no positive number: the Worker reads it first (`main.rs`).
pub const RUNTIME_THREADS: &str = "TOKIO_WORKER_THREADS";
/// The most runtime threads taken.
const MAX_RUNTIME_THREADS: usize = 1024;

/// `TOKIO_WORKER_THREADS` (unset or blank: `None`, the cores available): a whole number from 1
/// to 1024. The problem never repeats the value.
pub fn runtime_threads(text: Option<&str>) -> Result<Option<usize>, String> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    match text.parse::<usize>() {
        Ok(threads) if (1..=MAX_RUNTIME_THREADS).contains(&threads) => Ok(Some(threads)),
        _ => Err(format!(
            "{RUNTIME_THREADS} must be a whole number of threads from 1 to \
             {MAX_RUNTIME_THREADS} (unset: one per core available)"
        )),
    }
}

//! Error redaction (contract §8): no host, port, user or password leaves the process.
//!
//! [`redact`] is the one way a text is redacted. Patterns catch what has a recognisable shape
//! (URIs, IP literals, `host:port`, quoted users); [`remember_host`] and [`remember_user`] add
//! the names of the datasources the process connects to, which drivers also print bare.

mod names;
mod tokens;

use std::borrow::Cow;
use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

pub use names::{remember_host, remember_user};

/// The rules, applied in order. The first four are the Go Worker's, with RE2's ASCII classes
/// spelled out; the rest catch what Rust's drivers and `std` print instead of Go's texts.
static RULES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    const SPACE: &str = r"[\t\n\f\r ]";
    const NOT_SPACE: &str = r"[^\t\n\f\r ]";
    let rules = [
        // Go 1: connection URIs.
        (format!(r"[0-9A-Za-z_]+://{NOT_SPACE}+"), "[redacted]"),
        // Go 2: network operands of Go's net errors.
        (
            format!(r"(?-u:\b)(dial (?:tcp|udp)|read tcp|write tcp|lookup){SPACE}+{NOT_SPACE}+"),
            "$1 [redacted]",
        ),
        // Go 3: driver address fields.
        (format!(r"Addr:{SPACE}+{NOT_SPACE}+"), "Addr: [redacted]"),
        // Go 4: IPv4 literals, with an optional port.
        (
            r"(?-u:\b)[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?::[0-9]+)?(?-u:\b)".to_owned(),
            "[redacted]",
        ),
        // std's `SocketAddrV6` display: `[::1]:5432`, `[fe80::1%2]:80`.
        (
            r"\[[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(?:%[0-9A-Za-z_.-]+)?\](?::[0-9]+)?".to_owned(),
            "[redacted]",
        ),
        // host:port with a dotted name or localhost: `db.internal:5432`, `localhost:3306`.
        (
            r"(?-u:\b)(?:localhost|[0-9A-Za-z](?:[0-9A-Za-z-]*[0-9A-Za-z])?(?:\.[0-9A-Za-z](?:[0-9A-Za-z-]*[0-9A-Za-z])?)+):[0-9]{1,5}(?-u:\b)"
                .to_owned(),
            "[redacted]",
        ),
        // MySQL: `Access denied for user 'root'@'10.1.2.3'`.
        (r"'[^']*'@'[^']*'".to_owned(), "[redacted]"),
        // PostgreSQL: `password authentication failed for user "alice"`, `role "alice"`.
        (r#"(?i)(?-u:\b)(user|role)\s+"[^"]*""#.to_owned(), "$1 [redacted]"),
        // libpq-style key=value connection strings.
        (
            r"(?i)(?-u:\b)(host|hostaddr|port|user|password|passwd|pwd|dbname)\s*=\s*(?:'[^']*'|[^\s;,]+)"
                .to_owned(),
            "$1=[redacted]",
        ),
        // rustls: `certificate not valid for name "db.internal"; ... DnsName("db.internal")`.
        (r#"(?i)(for name)\s+"[^"]*""#.to_owned(), "$1 [redacted]"),
        (
            r#"(DnsName|IpAddress)\("[^"]*"\)"#.to_owned(),
            "$1([redacted])",
        ),
    ];
    rules
        .into_iter()
        .map(|(pattern, replacement)| {
            // Constant patterns: they compile, or every test of this module fails.
            let regex = Regex::new(&pattern).expect("valid redaction pattern");
            (regex, replacement)
        })
        .collect()
});

/// Redacts network addresses, URIs, credentials and the remembered host and user names from an
/// error text; the rest survives, so the message still says what went wrong. Redacting a
/// redacted text changes nothing.
pub fn redact(text: &str) -> String {
    let mut out = Cow::Borrowed(text);
    for (regex, replacement) in RULES.iter() {
        if let Cow::Owned(replaced) = regex.replace_all(&out, *replacement) {
            out = Cow::Owned(replaced);
        }
    }
    // After the patterns, so `db-7.internal:5432` goes whole, port included.
    if let Cow::Owned(replaced) = names::redact_names(&out) {
        out = Cow::Owned(replaced);
    }
    tokens::redact_tokens(&out)
}

/// An error text that went through [`redact`]: the only kind of text the Worker stores with a
/// job or publishes in `metadata.error.message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted(String);

impl Redacted {
    /// Redacts `text`. Redacting an already redacted text changes nothing.
    pub fn new(text: &str) -> Redacted {
        Redacted(redact(text))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests;

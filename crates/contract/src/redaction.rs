//! Error redaction (contract §8): no host, port, user or password leaves the process.

use std::borrow::Cow;
use std::fmt;
use std::net::Ipv6Addr;
use std::sync::LazyLock;

use regex::Regex;

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

/// Redacts network addresses, URIs and credentials from an error text; the rest survives, so
/// the message still says what went wrong.
pub fn redact(text: &str) -> String {
    let mut out = Cow::Borrowed(text);
    for (regex, replacement) in RULES.iter() {
        if let Cow::Owned(replaced) = regex.replace_all(&out, *replacement) {
            out = Cow::Owned(replaced);
        }
    }
    redact_bare_ipv6(&out)
}

/// Bare IPv6 literals (`::1`, `fe80::1%eth0`), as `std::net::Ipv6Addr` prints them. A pattern
/// would also catch times like `12:30:45` and Rust paths like `io::Error`; parsing each candidate
/// token catches only real addresses.
fn redact_bare_ipv6(text: &str) -> String {
    let is_token_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '%' | '_');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(is_token_char) {
        out.push_str(&rest[..start]);
        let token_len = rest[start..]
            .find(|c: char| !is_token_char(c))
            .unwrap_or(rest.len() - start);
        let token = &rest[start..start + token_len];
        let address = token.split('%').next().unwrap_or(token);
        if token.matches(':').count() >= 2 && address.parse::<Ipv6Addr>().is_ok() {
            out.push_str("[redacted]");
        } else {
            out.push_str(token);
        }
        rest = &rest[start + token_len..];
    }
    out.push_str(rest);
    out
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
mod tests {
    use super::redact;
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};

    #[test]
    fn std_socket_addresses_are_redacted() {
        let v4 = SocketAddr::from((Ipv4Addr::new(10, 1, 2, 3), 5432));
        let v6 = SocketAddr::from(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 5432, 0, 0));
        let scoped = SocketAddrV6::new("fe80::1".parse().expect("v6"), 80, 0, 2);
        for addr in [v4.to_string(), v6.to_string(), scoped.to_string()] {
            assert_eq!(
                redact(&format!("connect to {addr} failed")),
                "connect to [redacted] failed"
            );
        }
        for ip in ["::1", "fe80::1%eth0", "2001:db8::8a2e:370:7334"] {
            assert_eq!(
                redact(&format!("peer {ip} reset")),
                "peer [redacted] reset",
                "{ip}"
            );
        }
    }

    #[test]
    fn texts_of_rust_drivers_keep_their_meaning_and_lose_their_secrets() {
        let cases = [
            (
                "error communicating with database: Connection refused (os error 111)",
                "error communicating with database: Connection refused (os error 111)",
            ),
            (
                "error returned from database: password authentication failed for user \"alice\"",
                "error returned from database: password authentication failed for user [redacted]",
            ),
            (
                "error returned from database: role \"alice\" does not exist",
                "error returned from database: role [redacted] does not exist",
            ),
            (
                "error returned from database: 1045 (28000): Access denied for user 'root'@'172.18.0.1' (using password: YES)",
                "error returned from database: 1045 (28000): Access denied for user [redacted] (using password: YES)",
            ),
            (
                "tcp connect error: db.internal:5432: Connection refused",
                "tcp connect error: [redacted]: Connection refused",
            ),
            ("connect to localhost:3306 timed out", "connect to [redacted] timed out"),
            (
                "invalid connection string: host=db.internal port=5432 user=app password=hunter2",
                "invalid connection string: host=[redacted] port=[redacted] user=[redacted] password=[redacted]",
            ),
            (
                "invalid peer certificate: certificate not valid for name \"db.internal\"; certificate is only valid for DnsName(\"other.internal\")",
                "invalid peer certificate: certificate not valid for name [redacted]; certificate is only valid for DnsName([redacted])",
            ),
            (
                "dispatch failure: io error: error trying to connect: tcp connect error: Connection refused (os error 111)",
                "dispatch failure: io error: error trying to connect: tcp connect error: Connection refused (os error 111)",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(redact(input), expected, "for {input:?}");
        }
    }

    #[test]
    fn times_paths_and_plain_words_survive() {
        for text in [
            "deadline 12:30:45 exceeded",
            "std::io::Error: broken pipe",
            "table payments failed schema validation",
            "connection not found for database: postgres_db",
        ] {
            assert_eq!(redact(text), text);
        }
    }
}

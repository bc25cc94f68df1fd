//! Addresses a pattern cannot tell from ordinary text, found by looking at whole tokens: bare
//! IPv6 literals (`::1`, `fe80::1%eth0`) and single-label `host:port` (`postgres:5432`, the
//! name of a container or Kubernetes service). Patterns would also catch times like
//! `12:30:45`, Rust paths like `io::Error` and timestamps like `2024-05-01T12:30:45Z`.

use std::net::Ipv6Addr;

/// `text` with its bare IPv6 literals and single-label `host:port` tokens replaced.
pub(super) fn redact_tokens(text: &str) -> String {
    let ipv6 = replace_tokens(
        text,
        |c| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '%' | '_'),
        &['.'],
        is_ipv6,
    );
    replace_tokens(
        &ipv6,
        |c| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '_' | '-'),
        &['.', ':'],
        is_single_label_host_port,
    )
}

/// Splits `text` into maximal runs of `is_token_char` and replaces each run that `is_address`
/// accepts once the punctuation in `trailing` (a sentence's end, `host:port: refused`) is
/// trimmed from its end.
fn replace_tokens(
    text: &str,
    is_token_char: impl Fn(char) -> bool,
    trailing: &[char],
    is_address: impl Fn(&str) -> bool,
) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(&is_token_char) {
        out.push_str(&rest[..start]);
        let token_len = rest[start..]
            .find(|c: char| !is_token_char(c))
            .unwrap_or(rest.len() - start);
        let token = &rest[start..start + token_len];
        let address = token.trim_end_matches(trailing);
        if is_address(address) {
            out.push_str("[redacted]");
            out.push_str(&token[address.len()..]);
        } else {
            out.push_str(token);
        }
        rest = &rest[start + token_len..];
    }
    out.push_str(rest);
    out
}

/// `::1`, `fe80::1%eth0`: as `std::net::Ipv6Addr` prints them, with an optional zone.
fn is_ipv6(token: &str) -> bool {
    let address = token.split('%').next().unwrap_or(token);
    token.matches(':').count() >= 2 && address.parse::<Ipv6Addr>().is_ok()
}

/// `postgres:5432`, `mysql-0:3306`: one DNS label that starts with a letter, one colon, a port.
/// Dotted names are the patterns' (`db.internal:5432`).
fn is_single_label_host_port(token: &str) -> bool {
    let Some((host, port)) = token.split_once(':') else {
        return false;
    };
    let label_ok = host.starts_with(|c: char| c.is_ascii_alphabetic())
        && !host.ends_with('-')
        && host.len() <= 63
        && host.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    let port_ok = !port.is_empty()
        && port.len() <= 5
        && port.chars().all(|c| c.is_ascii_digit())
        && port.parse::<u32>().is_ok_and(|p| p <= 65_535);
    label_ok && port_ok
}

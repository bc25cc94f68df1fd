//! The host and user names of the datasources this process connects to, redacted wherever they
//! appear as whole words: drivers print them bare (`role "reader"`, `failed to lookup
//! reader-db`), where no pattern can tell them from ordinary words.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::RwLock;

/// Names shorter than this are not redacted as bare words: a user called `u` or a host called
/// `db` would take every such word out of every message. Such names still lose their quoted
/// and `host:port` forms to the patterns.
const MIN_BARE_LEN: usize = 3;

/// ASCII-lowercase names, longest first, so a host is redacted before a label of it.
static NAMES: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Redacts `host` from every later [`redact`](super::redact), as a whole word, in any ASCII
/// case. A dotted name's first label is redacted too (`db-7` of `db-7.prod.internal`): drivers
/// and resolvers print either. IP literals need no entry: every IP literal is redacted.
pub fn remember_host(host: &str) {
    let host = host.trim_end_matches('.');
    if host.parse::<IpAddr>().is_ok() {
        return;
    }
    remember(host);
    if let Some((label, _)) = host.split_once('.') {
        if !label.bytes().all(|b| b.is_ascii_digit()) {
            remember(label);
        }
    }
}

/// Redacts `user` from every later [`redact`](super::redact), as a whole word, in any ASCII
/// case.
pub fn remember_user(user: &str) {
    remember(user);
}

fn remember(name: &str) {
    let name = name.to_ascii_lowercase();
    // `redacted` would be found again inside `[redacted]`, and redaction must be idempotent.
    if name.len() < MIN_BARE_LEN || name == "redacted" {
        return;
    }
    if read().contains(&name) {
        return;
    }
    let mut names = NAMES.write().unwrap_or_else(|e| e.into_inner());
    if !names.contains(&name) {
        names.push(name);
        names.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }
}

fn read() -> std::sync::RwLockReadGuard<'static, Vec<String>> {
    // A poisoned lock only means a writer panicked mid-push; the list is still whole.
    NAMES.read().unwrap_or_else(|e| e.into_inner())
}

/// `text` with every remembered name (and a `:port` right after it) replaced.
pub(super) fn redact_names(text: &str) -> Cow<'_, str> {
    let names = read();
    let mut out = Cow::Borrowed(text);
    for name in names.iter() {
        if let Some(replaced) = replace_word(&out, name) {
            out = Cow::Owned(replaced);
        }
    }
    out
}

/// Replaces whole-word, ASCII-case-insensitive occurrences of `name` (lowercase); `None` when
/// there is none.
fn replace_word(text: &str, name: &str) -> Option<String> {
    // ASCII lowercasing keeps every byte offset, and a UTF-8 needle found in UTF-8 text always
    // starts and ends on character boundaries.
    let lower = text.to_ascii_lowercase();
    let bytes = text.as_bytes();
    let is_word = |at: usize| {
        bytes
            .get(at)
            .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    };
    let mut out = String::new();
    let mut copied = 0;
    for (start, _) in lower.match_indices(name) {
        let end = start + name.len();
        if start < copied || (start > 0 && is_word(start - 1)) || is_word(end) {
            continue;
        }
        out.push_str(&text[copied..start]);
        out.push_str("[redacted]");
        copied = end + port_len(&bytes[end..]);
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// The length of a `:port` (one to five digits, then no other digit) at the start of `rest`.
fn port_len(rest: &[u8]) -> usize {
    if rest.first() != Some(&b':') {
        return 0;
    }
    let digits = rest[1..].iter().take_while(|b| b.is_ascii_digit()).count();
    if (1..=5).contains(&digits) {
        1 + digits
    } else {
        0
    }
}

//! The signed `jobId` of a body, found by a shallow scan: the document's syntax is checked the way
//! Go's `json.Valid` checks it, but no tree is built, so an unauthenticated body costs one pass
//! over its bytes and no memory that grows with it.
//!
//! Go's Manager signs `jobId` as `json.Unmarshal` of the body into a map of raw messages sees it:
//! the body must be syntactically valid JSON (any number is fine, strings may hold invalid UTF-8,
//! nesting up to 10,000 levels), its top level an object, and the value of the last member whose
//! decoded name is exactly `jobId` a string. Anything else signs an empty id. Should this scan and
//! the signer ever disagree, the signature fails: the scan decides which payload to check, never
//! whether it is genuine.

/// Go's `encoding/json` nesting limit (`maxNestingDepth`).
const MAX_DEPTH: usize = 10_000;

/// A `jobId` value longer than this (raw, before unescaping) is not decoded: no job id is that
/// long, so such a message cannot verify with any id this scan could return.
const MAX_JOB_ID_BYTES: usize = 1024;

/// What a shallow scan found as the signed job id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScannedJobId {
    /// The id the signature covers (empty when the body has none).
    Id(String),
    /// A `jobId` string too long to be any job's id: no signature over this body can be accepted.
    TooLong,
}

/// The signed job id of `body` (see the module documentation), for verification: an id longer
/// than any job's is reported, not decoded.
pub fn scan_job_id(body: &[u8]) -> ScannedJobId {
    match scan(body) {
        Some(found) if found.end - found.start > MAX_JOB_ID_BYTES => ScannedJobId::TooLong,
        Some(found) => ScannedJobId::Id(decode(&body[found.start..found.end], found.escaped)),
        None => ScannedJobId::Id(String::new()),
    }
}

/// The signed job id of `body` whatever its length (empty when it has none), for a signer.
pub fn signed_job_id(body: &[u8]) -> String {
    scan(body).map_or_else(String::new, |found| {
        decode(&body[found.start..found.end], found.escaped)
    })
}

fn scan(body: &[u8]) -> Option<Span> {
    Scanner::new(body).top_level().ok().flatten()
}

/// How many JSON values `body` holds (every scalar, array and object, members' values
/// included), or `None` when it is not one valid JSON document by the rules above. One pass,
/// no tree: what a decoder would build for the body is bounded before it builds it.
pub fn json_values(body: &[u8]) -> Option<u64> {
    let mut scanner = Scanner::new(body);
    scanner.value().ok()?;
    scanner.whitespace();
    (scanner.pos == body.len()).then_some(scanner.values)
}

/// The body is not valid JSON (or not an object at the top).
struct Invalid;

/// A string's contents in the body, between its quotes.
#[derive(Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
    escaped: bool,
}

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Values started so far.
    values: u64,
}

impl<'a> Scanner<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Scanner {
            bytes,
            pos: 0,
            values: 0,
        }
    }

    /// Scans the whole document; the last top-level `jobId` member's string value, if any.
    fn top_level(&mut self) -> Result<Option<Span>, Invalid> {
        self.whitespace();
        if self.next() != Some(b'{') {
            return Err(Invalid);
        }
        let mut found = None;
        self.whitespace();
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                self.whitespace();
                if self.next() != Some(b'"') {
                    return Err(Invalid);
                }
                let name = self.string()?;
                self.whitespace();
                if self.next() != Some(b':') {
                    return Err(Invalid);
                }
                self.whitespace();
                if is_job_id(&self.bytes[name.start..name.end], name.escaped) {
                    found = if self.peek() == Some(b'"') {
                        self.pos += 1;
                        Some(self.string()?)
                    } else {
                        self.value()?;
                        None
                    };
                } else {
                    self.value()?;
                }
                self.whitespace();
                match self.next() {
                    Some(b',') => continue,
                    Some(b'}') => break,
                    _ => return Err(Invalid),
                }
            }
        }
        self.whitespace();
        if self.pos != self.bytes.len() {
            return Err(Invalid);
        }
        Ok(found)
    }

    /// Skips one value at the top level of an object, iteratively (no recursion an attacker can
    /// deepen), checking its syntax. `open` records, per open container, whether it is an object.
    fn value(&mut self) -> Result<(), Invalid> {
        let mut open: Vec<bool> = Vec::new();
        loop {
            // A value starts here.
            self.values += 1;
            self.whitespace();
            match self.next() {
                Some(b'"') => {
                    self.string()?;
                }
                Some(b'{') => {
                    Self::depth_check(&open)?;
                    self.whitespace();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                    } else {
                        open.push(true);
                        self.member_name()?;
                        continue;
                    }
                }
                Some(b'[') => {
                    Self::depth_check(&open)?;
                    self.whitespace();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                    } else {
                        open.push(false);
                        continue;
                    }
                }
                Some(b't') => self.literal(b"rue")?,
                Some(b'f') => self.literal(b"alse")?,
                Some(b'n') => self.literal(b"ull")?,
                Some(b) if b == b'-' || b.is_ascii_digit() => self.number(b)?,
                _ => return Err(Invalid),
            }
            // A value ended: close containers until one continues with a comma.
            loop {
                let Some(&is_object) = open.last() else {
                    return Ok(());
                };
                self.whitespace();
                match (self.next(), is_object) {
                    (Some(b','), true) => {
                        self.member_name()?;
                        break;
                    }
                    (Some(b','), false) => break,
                    (Some(b'}'), true) | (Some(b']'), false) => {
                        open.pop();
                    }
                    _ => return Err(Invalid),
                }
            }
        }
    }

    /// `"name" :` inside an object, leaving the scanner before the member's value.
    fn member_name(&mut self) -> Result<(), Invalid> {
        self.whitespace();
        if self.next() != Some(b'"') {
            return Err(Invalid);
        }
        self.string()?;
        self.whitespace();
        if self.next() != Some(b':') {
            return Err(Invalid);
        }
        Ok(())
    }

    /// Whether one more container may open inside `open` (the top-level object is one level).
    fn depth_check(open: &[bool]) -> Result<(), Invalid> {
        if open.len() + 2 > MAX_DEPTH {
            return Err(Invalid);
        }
        Ok(())
    }

    /// A string's contents, the opening quote already read; leaves the scanner after the closing
    /// quote. Control characters are refused and escapes checked, as Go's scanner does; other
    /// bytes (invalid UTF-8 included) pass.
    fn string(&mut self) -> Result<Span, Invalid> {
        let start = self.pos;
        let mut escaped = false;
        loop {
            match self.next() {
                None => return Err(Invalid),
                Some(b'"') => {
                    return Ok(Span {
                        start,
                        end: self.pos - 1,
                        escaped,
                    })
                }
                Some(b'\\') => {
                    escaped = true;
                    match self.next() {
                        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => {}
                        Some(b'u') => {
                            for _ in 0..4 {
                                if !self.next().is_some_and(|b| b.is_ascii_hexdigit()) {
                                    return Err(Invalid);
                                }
                            }
                        }
                        _ => return Err(Invalid),
                    }
                }
                Some(b) if b < 0x20 => return Err(Invalid),
                Some(_) => {}
            }
        }
    }

    /// JSON's number grammar: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; `first` is read.
    fn number(&mut self, first: u8) -> Result<(), Invalid> {
        let first_digit = if first == b'-' {
            self.next().ok_or(Invalid)?
        } else {
            first
        };
        match first_digit {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return Err(Invalid),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.some_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.some_digits()?;
        }
        Ok(())
    }

    fn some_digits(&mut self) -> Result<(), Invalid> {
        if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
            return Err(Invalid);
        }
        self.digits();
        Ok(())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    fn literal(&mut self, rest: &[u8]) -> Result<(), Invalid> {
        if self.bytes[self.pos..].starts_with(rest) {
            self.pos += rest.len();
            Ok(())
        } else {
            Err(Invalid)
        }
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.pos += 1;
        Some(byte)
    }
}

/// Whether a member name decodes to exactly `jobId`, without allocating for long names.
fn is_job_id(raw: &[u8], escaped: bool) -> bool {
    if !escaped {
        return raw == b"jobId";
    }
    // An escaped name takes at least one byte per character: a long one cannot match.
    raw.len() <= 5 * 6 && decode(raw, true) == "jobId"
}

/// The text of a string's contents (checked by [`Scanner::string`]), as Go decodes it: escapes
/// resolved, invalid UTF-8 and lone surrogates replaced by U+FFFD.
fn decode(raw: &[u8], escaped: bool) -> String {
    if !escaped {
        return String::from_utf8_lossy(raw).into_owned();
    }
    let mut bytes = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] != b'\\' {
            bytes.push(raw[i]);
            i += 1;
            continue;
        }
        let kind = raw[i + 1];
        i += 2;
        let simple = match kind {
            b'b' => Some(b'\x08'),
            b'f' => Some(b'\x0c'),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'u' => None,
            other => Some(other),
        };
        if let Some(byte) = simple {
            bytes.push(byte);
            continue;
        }
        let unit = hex4(&raw[i..i + 4]);
        i += 4;
        let low = (0xD800..0xDC00)
            .contains(&unit)
            .then(|| {
                raw.get(i..i + 6)
                    .filter(|next| next.starts_with(b"\\u"))
                    .map(|next| hex4(&next[2..]))
                    .filter(|low| (0xDC00..0xE000).contains(low))
            })
            .flatten();
        let scalar = match low {
            Some(low) => {
                i += 6;
                0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
            }
            None => unit,
        };
        let c = char::from_u32(scalar).unwrap_or(char::REPLACEMENT_CHARACTER);
        bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Four hex digits, already checked by [`Scanner::string`].
fn hex4(digits: &[u8]) -> u32 {
    digits.iter().fold(0, |acc, &d| {
        acc * 16 + char::from(d).to_digit(16).unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(body: &str) -> String {
        match scan_job_id(body.as_bytes()) {
            ScannedJobId::Id(id) => id,
            ScannedJobId::TooLong => panic!("too long"),
        }
    }

    #[test]
    fn the_last_exact_top_level_member_is_the_signed_id() {
        assert_eq!(id(r#"{"jobId":"a","x":{"jobId":"b"},"jobId":"c"}"#), "c");
        assert_eq!(id(r#" {"JOBID":"a","jobid":"b"} "#), "");
        assert_eq!(id(r#"{"job\u0049d":"a"}"#), "a");
        assert_eq!(id(r#"{"jobId":"a","jobId":5}"#), "");
        assert_eq!(id(r#"{"jobId":"\u00e9\n\ud83d\ude00"}"#), "é\n😀");
    }

    #[test]
    fn anything_but_a_valid_object_signs_an_empty_id() {
        for body in [
            r#"["jobId","a"]"#,
            r#""jobId""#,
            r#"{"jobId":"a""#,
            r#"{"jobId":"a"} x"#,
            r#"{"jobId":"a","n":01}"#,
            r#"{"jobId":"a","n":[1,]}"#,
            r#"{"jobId":"a","s":"tab	inside"}"#,
            r#"{"jobId":"a","s":"\x"}"#,
            r#"{"jobId":"a","o":{"k" 1}}"#,
            r#"{"jobId":"a","t":tru}"#,
            "",
        ] {
            assert_eq!(id(body), "", "{body}");
        }
    }

    #[test]
    fn go_accepts_what_serde_would_not() {
        // Go's scanner checks syntax only: huge numbers and invalid UTF-8 are still valid JSON.
        assert_eq!(id(r#"{"jobId":"a","n":1e400}"#), "a");
        assert_eq!(
            scan_job_id(b"{\"jobId\":\"a\",\"s\":\"\xff\"}"),
            ScannedJobId::Id("a".into())
        );
        assert_eq!(id(r#"{"jobId":"\ud800"}"#), "\u{fffd}");
    }

    #[test]
    fn nesting_is_bounded_like_go() {
        let nested = |depth: usize| {
            format!(
                r#"{{"jobId":"a","d":{}{}}}"#,
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        assert_eq!(id(&nested(MAX_DEPTH - 1)), "a");
        assert_eq!(id(&nested(MAX_DEPTH)), "");
    }

    #[test]
    fn values_are_counted_in_any_valid_document() {
        assert_eq!(json_values(b"1"), Some(1));
        assert_eq!(
            json_values(br#" {"a":[1,{"b":null},"x"],"c":{}} "#),
            Some(7)
        );
        assert_eq!(json_values(b"[]"), Some(1));
        assert_eq!(json_values(b"[1,]"), None);
        assert_eq!(json_values(b"{} {}"), None);
        assert_eq!(json_values(b""), None);
    }

    #[test]
    fn a_job_id_longer_than_any_id_is_never_decoded() {
        let body = format!(r#"{{"jobId":"{}"}}"#, "a".repeat(MAX_JOB_ID_BYTES + 1));
        assert_eq!(scan_job_id(body.as_bytes()), ScannedJobId::TooLong);
    }
}

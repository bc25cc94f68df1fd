//! String escaping as Go's `encoding/json` does it, invalid UTF-8 included.

use std::io::{self, Write};

/// Byte needs no escaping.
const RAW: u8 = 0;
/// Byte is written as `\u00XX` (lowercase hex).
const HEX: u8 = b'u';
/// Byte 0xE2 may start U+2028 (E2 80 A8) or U+2029 (E2 80 A9); look at the next two bytes.
const LINE_SEP: u8 = 1;

/// What to do with each byte of valid UTF-8: `RAW`, `HEX`, `LINE_SEP`, or the letter that follows
/// the backslash in a short escape (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`).
///
/// Go writes DEL (0x7f), `/` and every other non-ASCII character raw.
static ESCAPE: [u8; 256] = {
    let mut table = [RAW; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = HEX;
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x0c] = b'f';
    table[b'\n' as usize] = b'n';
    table[b'\r' as usize] = b'r';
    table[b'\t' as usize] = b't';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    // Go escapes these so that JSON can be embedded in HTML (`SetEscapeHTML(true)` is the default).
    table[b'<' as usize] = HEX;
    table[b'>' as usize] = HEX;
    table[b'&' as usize] = HEX;
    table[0xE2] = LINE_SEP;
    table
};

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Go's replacement for one byte that does not decode as UTF-8.
const REPLACEMENT: &[u8] = b"\\ufffd";

/// Closes a string value.
pub(crate) const QUOTE: &[u8] = b"\"";

/// Writes `s` as a JSON string: an opening quote, the escaped text, then `close`, which is the
/// closing quote, possibly followed by what comes next (a key's colon), saving a write.
#[inline]
pub(crate) fn write_str<W: Write>(out: &mut W, s: &str, close: &[u8]) -> io::Result<()> {
    out.write_all(QUOTE)?;
    write_body(out, s)?;
    out.write_all(close)
}

/// Writes arbitrary bytes as a quoted JSON string. Go decodes rune by rune and, on a decoding
/// error, consumes exactly one byte and emits U+FFFD; so every byte outside a valid sequence
/// becomes one `\ufffd`. `utf8_chunks` groups a broken sequence's bytes (a lead byte and the
/// continuation bytes that looked right so far) into one `invalid()` slice, but none of those
/// bytes can start a valid sequence, so one replacement per byte matches Go exactly.
/// `close` is as for [`write_str`].
pub(crate) fn write_bytes<W: Write>(out: &mut W, bytes: &[u8], close: &[u8]) -> io::Result<()> {
    out.write_all(QUOTE)?;
    // Text from a database is nearly always valid, and mostly ASCII: its ASCII start is escaped
    // in the pass that finds it is ASCII (ASCII is valid UTF-8 by itself, and ends on a
    // character boundary); only what follows is validated (word-at-a-time over ASCII), instead
    // of the lossy decoder, which walks it byte by byte.
    let ascii = write_escaped::<true>(out, bytes)?;
    let rest = &bytes[ascii..];
    if let Ok(valid) = std::str::from_utf8(rest) {
        write_body(out, valid)?;
        return out.write_all(close);
    }
    for chunk in rest.utf8_chunks() {
        write_body(out, chunk.valid())?;
        for _ in chunk.invalid() {
            out.write_all(REPLACEMENT)?;
        }
    }
    out.write_all(close)
}

/// Bytes per word of [`needs_attention`].
const WORD: usize = 8;
const ONES: u64 = u64::from_ne_bytes([0x01; WORD]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; WORD]);

/// Whether any byte of `word` is zero.
#[inline(always)]
fn has_zero_byte(word: u64) -> bool {
    word.wrapping_sub(ONES) & !word & HIGHS != 0
}

/// Whether any of the eight bytes of `word` may need more than being copied: a control
/// character, `"`, `&`, `<`, `>`, `\`, or any non-ASCII byte (0xE2 may start U+2028/U+2029).
/// A word without any is copied as it is; one with any goes through [`ESCAPE`] byte by byte.
#[inline(always)]
fn needs_attention(word: u64) -> bool {
    let splat = |byte: u8| u64::from_ne_bytes([byte; WORD]);
    // A byte below 0x20: subtracting 0x20 borrows into its high bit, which was clear.
    let control = word.wrapping_sub(splat(0x20)) & !word & HIGHS != 0;
    control
        || word & HIGHS != 0
        || has_zero_byte(word ^ splat(b'"'))
        || has_zero_byte(word ^ splat(b'\\'))
        || has_zero_byte(word ^ splat(b'<'))
        || has_zero_byte(word ^ splat(b'>'))
        || has_zero_byte(word ^ splat(b'&'))
}

/// Writes the escaped contents of `s` (no quotes), copying unescaped runs in one `write_all`.
fn write_body<W: Write>(out: &mut W, s: &str) -> io::Result<()> {
    write_escaped::<false>(out, s.as_bytes()).map(|_| ())
}

/// Writes `bytes` escaped, copying unescaped runs in one `write_all`, and answers how many it
/// wrote: all of them, which must then be valid UTF-8; or, with `ASCII_ONLY`, those before the
/// first 8-byte word (in the last bytes, the first byte) that is not all ASCII, whatever
/// follows.
#[inline(always)]
fn write_escaped<const ASCII_ONLY: bool>(out: &mut impl Write, bytes: &[u8]) -> io::Result<usize> {
    let mut run_start = 0;
    let mut i = 0;
    'words: while i < bytes.len() {
        // A word that needs nothing stays in the run; the bytes of one that may need something
        // go through the table, one by one.
        let end = match bytes.get(i..i + WORD) {
            Some(word) => {
                let word = u64::from_ne_bytes(word.try_into().unwrap_or([0; WORD]));
                if !needs_attention(word) {
                    i += WORD;
                    continue;
                }
                if ASCII_ONLY && word & HIGHS != 0 {
                    break 'words;
                }
                i + WORD
            }
            None => bytes.len(),
        };
        while i < end {
            if ASCII_ONLY && !bytes[i].is_ascii() {
                break 'words;
            }
            i = escape_byte(out, bytes, i, &mut run_start)?;
        }
    }
    out.write_all(&bytes[run_start..i])?;
    Ok(i)
}

/// Handles the byte at `i` of valid UTF-8 `bytes` (or an ASCII byte of any bytes): leaves it in
/// the run that started at `run_start`, or writes the run and the byte's escape and starts a new
/// run after it. Returns where the next byte is.
#[inline(always)]
fn escape_byte<W: Write>(
    out: &mut W,
    bytes: &[u8],
    i: usize,
    run_start: &mut usize,
) -> io::Result<usize> {
    let byte = bytes[i];
    let action = ESCAPE[usize::from(byte)];
    if action == RAW {
        return Ok(i + 1);
    }
    if action == LINE_SEP {
        // Valid UTF-8 (`bytes` is a str): E2 80 A8/A9 are U+2028/U+2029; other E2 sequences are
        // ordinary characters and stay in the run.
        let escape: &[u8] = match (bytes.get(i + 1), bytes.get(i + 2)) {
            (Some(0x80), Some(0xA8)) => b"\\u2028",
            (Some(0x80), Some(0xA9)) => b"\\u2029",
            _ => return Ok(i + 1),
        };
        out.write_all(&bytes[*run_start..i])?;
        out.write_all(escape)?;
        *run_start = i + 3;
        return Ok(i + 3);
    }
    if *run_start < i {
        out.write_all(&bytes[*run_start..i])?;
    }
    if action == HEX {
        let hex = [
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX_DIGITS[usize::from(byte >> 4)],
            HEX_DIGITS[usize::from(byte & 0x0f)],
        ];
        out.write_all(&hex)?;
    } else {
        out.write_all(&[b'\\', action])?;
    }
    *run_start = i + 1;
    Ok(i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quoted(s: &str) -> String {
        let mut out = Vec::new();
        write_str(&mut out, s, QUOTE).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn quoted_bytes(bytes: &[u8]) -> String {
        let mut out = Vec::new();
        write_bytes(&mut out, bytes, QUOTE).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn every_control_character_is_escaped_like_go() {
        for byte in 0u8..0x20 {
            let expected = match byte {
                0x08 => "\\b".to_string(),
                0x09 => "\\t".to_string(),
                0x0a => "\\n".to_string(),
                0x0c => "\\f".to_string(),
                0x0d => "\\r".to_string(),
                _ => format!("\\u{byte:04x}"),
            };
            let input = char::from(byte).to_string();
            assert_eq!(
                quoted(&input),
                format!("\"{expected}\""),
                "byte {byte:#04x}"
            );
        }
    }

    #[test]
    fn control_escapes_use_lowercase_hex() {
        assert_eq!(quoted("\u{1b}\u{1f}"), "\"\\u001b\\u001f\"");
    }

    #[test]
    fn quote_and_backslash_get_short_escapes() {
        assert_eq!(quoted("a\"b\\c"), "\"a\\\"b\\\\c\"");
    }

    #[test]
    fn html_characters_are_escaped() {
        assert_eq!(quoted("<a>&"), "\"\\u003ca\\u003e\\u0026\"");
    }

    #[test]
    fn del_slash_and_non_ascii_stay_raw() {
        assert_eq!(quoted("\u{7f}/é日😀"), "\"\u{7f}/é日😀\"");
    }

    #[test]
    fn line_and_paragraph_separators_are_escaped() {
        assert_eq!(quoted("a\u{2028}b\u{2029}c"), "\"a\\u2028b\\u2029c\"");
    }

    #[test]
    fn other_characters_sharing_the_e2_lead_byte_stay_raw() {
        // U+2027, U+202A, U+20AC (euro), U+2100: all start with 0xE2.
        let s = "\u{2027}\u{202a}\u{20ac}\u{2100}";
        assert_eq!(quoted(s), format!("\"{s}\""));
        assert_eq!(quoted("€"), "\"€\"");
    }

    #[test]
    fn empty_string_is_two_quotes() {
        assert_eq!(quoted(""), "\"\"");
        assert_eq!(quoted_bytes(b""), "\"\"");
    }

    #[test]
    fn each_invalid_byte_becomes_one_replacement_escape() {
        assert_eq!(quoted_bytes(b"ok\xff\xfeend"), "\"ok\\ufffd\\ufffdend\"");
        // A truncated 3-byte sequence: two bytes, two replacements (Go consumes one at a time).
        assert_eq!(quoted_bytes(b"\xe2\x80A"), "\"\\ufffd\\ufffdA\"");
        // An encoded surrogate is invalid: three replacements.
        assert_eq!(quoted_bytes(b"\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");
        // Overlong encoding of '/'.
        assert_eq!(quoted_bytes(b"\xc0\xaf"), "\"\\ufffd\\ufffd\"");
    }

    /// An ASCII start of any length (escapes included) is escaped in the pass that finds it,
    /// and what follows it as before, whether it is valid UTF-8, a separator or invalid bytes.
    #[test]
    fn an_ascii_start_of_any_length_then_anything_is_escaped_as_its_lossy_decoding() {
        let suffixes: [&[u8]; 7] = [
            b"",
            "é日😀".as_bytes(),
            b"\xe2\x80\xa8x",
            b"\xff",
            b"\xe2\x80",
            b"\xc3\xa9\xff<",
            b"abc\xc3",
        ];
        for len in 0..24 {
            let start: Vec<u8> = (0..len).map(|i| b"a\"<\n&z\\/"[i % 8]).collect();
            for suffix in suffixes {
                let bytes = [start.as_slice(), suffix].concat();
                // Each valid piece escaped as a string, each invalid byte as one `\ufffd`.
                let mut expected = String::from("\"");
                for chunk in bytes.utf8_chunks() {
                    let valid = quoted(chunk.valid());
                    expected.push_str(&valid[1..valid.len() - 1]);
                    expected.push_str(&"\\ufffd".repeat(chunk.invalid().len()));
                }
                expected.push('"');
                assert_eq!(quoted_bytes(&bytes), expected, "{bytes:?}");
            }
        }
    }

    #[test]
    fn valid_bytes_are_escaped_like_strings() {
        let s = "x<\u{2028}\n日";
        assert_eq!(quoted_bytes(s.as_bytes()), quoted(s));
    }

    /// Go's escaping, one character at a time, as plainly as it can be written.
    fn reference(s: &str) -> String {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '<' | '>' | '&' | '\u{0}'..='\u{1f}' | '\u{2028}' | '\u{2029}' => {
                    out.push_str(&format!("\\u{:04x}", u32::from(c)));
                }
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

        /// Whole clean words are skipped, so an escape at any offset from a word's start, and
        /// any mix of them, must still come out as Go's.
        #[test]
        fn strings_are_escaped_as_the_plain_reference_escapes_them(
            s in "([a-z0-9 ./]{0,9}|[<>&\"\\\\\u{0}-\u{1f}\u{7f}]|é|€|\u{2028}|\u{2029}|\u{2027}|日|😀){0,24}"
        ) {
            proptest::prop_assert_eq!(quoted(&s), reference(&s));
            proptest::prop_assert_eq!(quoted_bytes(s.as_bytes()), reference(&s));
        }

        #[test]
        fn arbitrary_bytes_are_escaped_as_their_lossy_decoding(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)
        ) {
            // Each invalid byte is one U+FFFD, written as `\ufffd`.
            let mut expected = String::from("\"");
            for chunk in bytes.utf8_chunks() {
                let valid = reference(chunk.valid());
                expected.push_str(&valid[1..valid.len() - 1]);
                for _ in chunk.invalid() {
                    expected.push_str("\\ufffd");
                }
            }
            expected.push('"');
            proptest::prop_assert_eq!(quoted_bytes(&bytes), expected);
        }
    }

    #[test]
    fn a_separator_cut_by_invalid_bytes_is_not_escaped() {
        // E2 80 then an invalid byte: no U+2028 here, only replacements.
        assert_eq!(quoted_bytes(b"\xe2\x80\xff"), "\"\\ufffd\\ufffd\\ufffd\"");
    }
}

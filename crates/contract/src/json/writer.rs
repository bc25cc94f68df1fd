//! Streaming JSON writer: nesting state, separators and indentation exactly as Go writes them.

use std::io::Write;

use super::encoded_key::EncodedKey;
use super::error::{JsonError, Result};
use super::escape;
use super::float::{self, FloatBuf};
use super::integer::{self, IntBuf};
use super::style::Style;
use super::time::GoTime;

/// One open container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// Inside `[...]`; `empty` until the first element is written.
    Array { empty: bool },
    /// Inside `{...}`; `empty` until the first key; `awaiting_value` between a key and its value.
    Object { empty: bool, awaiting_value: bool },
}

/// Writes one JSON value, piece by piece, in Go's compact or indented layout.
///
/// Keys are written in the order given: the caller sorts them once (Go sorts map keys by byte
/// order). [`JsonWriter::value`] writes a whole `serde_json::Value`, sorting its object keys.
///
/// The writer issues many small writes and buffers nothing itself, so a `Vec<u8>` (or a
/// `&mut Vec<u8>`) is written to directly; callers writing to a file or socket should pass a
/// `std::io::BufWriter`.
///
/// A call that does not fit the document so far (a value where a key is expected, an `end_*`
/// that does not match, a second top-level value) returns [`JsonError::Misuse`] and writes
/// nothing. After a [`JsonError::Io`] error the output is incomplete and should be discarded.
#[derive(Debug)]
pub struct JsonWriter<W: Write> {
    out: W,
    style: Style,
    stack: Vec<Frame>,
    /// Nesting of the enclosing document this value is embedded in (0 for a whole document).
    base_depth: usize,
    /// The top-level value has been started (there is exactly one per document).
    started: bool,
}

impl<W: Write> JsonWriter<W> {
    /// A writer producing one document in `style` into `out`.
    pub fn new(out: W, style: Style) -> Self {
        Self::nested(out, style, 0)
    }

    /// A writer for one value that the caller splices into an enclosing document at nesting
    /// `depth` (1 = a member of the top-level object): indentation starts `depth` levels in, so
    /// parts of a document can be written separately (e.g. in parallel) and concatenated. The
    /// caller writes what surrounds the value (its key, separators, the enclosing brackets).
    pub fn nested(out: W, style: Style, depth: usize) -> Self {
        JsonWriter {
            out,
            style,
            stack: Vec::new(),
            base_depth: depth,
            started: false,
        }
    }

    /// The layout this writer produces.
    pub fn style(&self) -> Style {
        self.style
    }

    /// The sink, e.g. to check how many bytes a `Vec<u8>` holds so far.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The sink, e.g. to take the bytes written so far out of a `Vec<u8>` and send them on: the
    /// writer keeps its nesting state, not its output, so what follows stays valid JSON once
    /// appended to what was taken.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Number of containers currently open (not counting a [`nested`](Self::nested) base).
    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    /// The nesting depth of the members of the innermost open container (what an
    /// [`EncodedKey`] for them is encoded for).
    pub fn member_depth(&self) -> usize {
        self.base_depth + self.stack.len()
    }

    /// True once exactly one complete top-level value has been written.
    pub fn is_complete(&self) -> bool {
        self.started && self.stack.is_empty()
    }

    /// Checks that the document is complete, flushes the sink and returns it.
    pub fn finish(mut self) -> Result<W> {
        if !self.is_complete() {
            return Err(JsonError::Misuse(
                "finish called before the value was complete",
            ));
        }
        self.out.flush()?;
        Ok(self.out)
    }

    /// Returns the sink as it is, complete or not, without flushing it.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// Opens an object (`{`).
    pub fn begin_object(&mut self) -> Result<()> {
        self.before_value()?;
        self.stack.push(Frame::Object {
            empty: true,
            awaiting_value: false,
        });
        Ok(self.out.write_all(b"{")?)
    }

    /// Closes the innermost object (`}`); it must not be waiting for a value after a key.
    pub fn end_object(&mut self) -> Result<()> {
        let empty = match self.stack.last() {
            Some(Frame::Object {
                empty,
                awaiting_value: false,
            }) => *empty,
            Some(Frame::Object { .. }) => {
                return Err(JsonError::Misuse("end_object right after a key"));
            }
            _ => return Err(JsonError::Misuse("end_object without an open object")),
        };
        self.close(empty, b"}")
    }

    /// Opens an array (`[`).
    pub fn begin_array(&mut self) -> Result<()> {
        self.before_value()?;
        self.stack.push(Frame::Array { empty: true });
        Ok(self.out.write_all(b"[")?)
    }

    /// Closes the innermost array (`]`).
    pub fn end_array(&mut self) -> Result<()> {
        let empty = match self.stack.last() {
            Some(Frame::Array { empty }) => *empty,
            _ => return Err(JsonError::Misuse("end_array without an open array")),
        };
        self.close(empty, b"]")
    }

    /// Writes an object key; the next call must write its value.
    pub fn key(&mut self, key: &str) -> Result<()> {
        self.before_key()?;
        Ok(escape::write_str(
            &mut self.out,
            key,
            self.style.key_close(),
        )?)
    }

    /// Writes an object key encoded beforehand ([`EncodedKey`]): the same bytes as
    /// [`key`](Self::key), without escaping it again. A key encoded for another depth or style
    /// is [`JsonError::Misuse`] and writes nothing.
    #[inline]
    pub fn encoded_key(&mut self, key: &EncodedKey) -> Result<()> {
        if !key.fits(self.style, self.member_depth()) {
            return Err(JsonError::Misuse(
                "a key encoded for another depth or style",
            ));
        }
        let first = self.take_key_slot()?;
        Ok(self.out.write_all(key.bytes(first))?)
    }

    /// Writes an object key given as bytes; invalid UTF-8 bytes become `\ufffd` as in Go.
    pub fn key_bytes(&mut self, key: &[u8]) -> Result<()> {
        self.before_key()?;
        Ok(escape::write_bytes(
            &mut self.out,
            key,
            self.style.key_close(),
        )?)
    }

    /// Writes a string value.
    pub fn string(&mut self, value: &str) -> Result<()> {
        self.before_value()?;
        Ok(escape::write_str(&mut self.out, value, escape::QUOTE)?)
    }

    /// Writes a string value given as bytes; invalid UTF-8 bytes become `\ufffd` as in Go.
    pub fn string_bytes(&mut self, value: &[u8]) -> Result<()> {
        self.before_value()?;
        Ok(escape::write_bytes(&mut self.out, value, escape::QUOTE)?)
    }

    /// Writes a time as Go's `time.Time` marshals it; its text needs no escaping.
    #[inline]
    pub fn time(&mut self, value: &GoTime) -> Result<()> {
        self.verbatim_string(value.as_bytes())
    }

    /// Writes a UUID as Go writes its usual string form: 36 characters, lowercase hex,
    /// hyphenated (`67e55044-10b1-426f-9247-bb680e5fe0c8`).
    #[inline]
    pub fn uuid(&mut self, value: &[u8; 16]) -> Result<()> {
        let mut text = uuid::Uuid::encode_buffer();
        let text = uuid::Uuid::from_bytes(*value)
            .hyphenated()
            .encode_lower(&mut text);
        self.verbatim_string(text.as_bytes())
    }

    /// Writes text that needs no escaping (the caller's type guarantees it), quoted.
    #[inline]
    fn verbatim_string(&mut self, text: &[u8]) -> Result<()> {
        self.before_value()?;
        self.out.write_all(escape::QUOTE)?;
        self.out.write_all(text)?;
        Ok(self.out.write_all(escape::QUOTE)?)
    }

    /// Writes a signed integer exactly.
    pub fn i64(&mut self, value: i64) -> Result<()> {
        self.before_value()?;
        let mut buf = IntBuf::default();
        Ok(self.out.write_all(integer::format_i64(value, &mut buf))?)
    }

    /// Writes an unsigned integer exactly.
    pub fn u64(&mut self, value: u64) -> Result<()> {
        self.before_value()?;
        let mut buf = IntBuf::default();
        Ok(self.out.write_all(integer::format_u64(value, &mut buf))?)
    }

    /// Writes a float as Go does; NaN and infinities are refused, as Go refuses them, and nothing
    /// is written.
    pub fn f64(&mut self, value: f64) -> Result<()> {
        let mut buf = FloatBuf::new();
        let text = float::format_f64(value, &mut buf).ok_or(JsonError::NonFiniteFloat(value))?;
        self.before_value()?;
        Ok(self.out.write_all(text)?)
    }

    /// Writes a single-precision float as Go writes a `float32`: its own shortest digits (`0.1`,
    /// not the `0.10000000149011612` of the widened double). NaN and infinities are refused, as
    /// Go refuses them, and nothing is written.
    pub fn f32(&mut self, value: f32) -> Result<()> {
        let mut buf = FloatBuf::new();
        let text = float::format_f32(value, &mut buf)
            .ok_or(JsonError::NonFiniteFloat(f64::from(value)))?;
        self.before_value()?;
        Ok(self.out.write_all(text)?)
    }

    /// Writes `true` or `false`.
    pub fn bool(&mut self, value: bool) -> Result<()> {
        self.before_value()?;
        let text: &[u8] = if value { b"true" } else { b"false" };
        Ok(self.out.write_all(text)?)
    }

    /// Writes `null`.
    pub fn null(&mut self) -> Result<()> {
        self.before_value()?;
        Ok(self.out.write_all(b"null")?)
    }

    /// Checks that a value may be written here, then writes what precedes it.
    #[inline]
    fn before_value(&mut self) -> Result<()> {
        let depth = self.base_depth + self.stack.len();
        match self.stack.last_mut() {
            None if self.started => Err(JsonError::Misuse("a document holds one top-level value")),
            None => {
                self.started = true;
                Ok(())
            }
            Some(Frame::Array { empty }) => {
                let first = *empty;
                *empty = false;
                Ok(self.style.write_item_prefix(&mut self.out, first, depth)?)
            }
            Some(Frame::Object { awaiting_value, .. }) if *awaiting_value => {
                *awaiting_value = false;
                Ok(())
            }
            Some(Frame::Object { .. }) => {
                Err(JsonError::Misuse("a value where a key was expected"))
            }
        }
    }

    /// Checks that a key may be written here, then writes what precedes it.
    #[inline]
    fn before_key(&mut self) -> Result<()> {
        let first = self.take_key_slot()?;
        let depth = self.base_depth + self.stack.len();
        Ok(self.style.write_item_prefix(&mut self.out, first, depth)?)
    }

    /// Checks that a key may be written here and moves the innermost object to await its value;
    /// returns whether the key is the object's first (no comma before it). Writes nothing.
    #[inline]
    fn take_key_slot(&mut self) -> Result<bool> {
        match self.stack.last_mut() {
            Some(Frame::Object {
                empty,
                awaiting_value,
            }) if !*awaiting_value => {
                let first = *empty;
                *empty = false;
                *awaiting_value = true;
                Ok(first)
            }
            Some(Frame::Object { .. }) => {
                Err(JsonError::Misuse("a key where a value was expected"))
            }
            _ => Err(JsonError::Misuse("a key outside an object")),
        }
    }

    /// Pops the innermost container and writes its closing bracket.
    fn close(&mut self, empty: bool, bracket: &'static [u8]) -> Result<()> {
        self.stack.pop();
        if !empty {
            let depth = self.base_depth + self.stack.len();
            self.style.write_close_prefix(&mut self.out, depth)?;
        }
        Ok(self.out.write_all(bracket)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn indented() -> JsonWriter<Vec<u8>> {
        JsonWriter::new(Vec::new(), Style::Indented)
    }

    fn text(writer: JsonWriter<Vec<u8>>) -> String {
        String::from_utf8(writer.finish().unwrap()).unwrap()
    }

    #[test]
    fn nested_containers_are_indented_two_spaces_per_level() {
        let mut w = indented();
        w.begin_object().unwrap();
        w.key("a").unwrap();
        w.begin_array().unwrap();
        w.i64(1).unwrap();
        w.begin_object().unwrap();
        w.key("b").unwrap();
        w.null().unwrap();
        w.end_object().unwrap();
        w.end_array().unwrap();
        w.key("c").unwrap();
        w.bool(true).unwrap();
        w.end_object().unwrap();
        let expected =
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": true\n}";
        assert_eq!(text(w), expected);
    }

    #[test]
    fn compact_has_no_whitespace() {
        let mut w = JsonWriter::new(Vec::new(), Style::Compact);
        w.begin_object().unwrap();
        w.key("a").unwrap();
        w.begin_array().unwrap();
        w.u64(u64::MAX).unwrap();
        w.f64(-0.0).unwrap();
        w.string("x").unwrap();
        w.end_array().unwrap();
        w.key("b").unwrap();
        w.bool(false).unwrap();
        w.end_object().unwrap();
        assert_eq!(
            text(w),
            "{\"a\":[18446744073709551615,-0,\"x\"],\"b\":false}"
        );
    }

    #[test]
    fn empty_containers_stay_on_one_line_when_indented() {
        let mut w = indented();
        w.begin_array().unwrap();
        w.begin_object().unwrap();
        w.end_object().unwrap();
        w.begin_array().unwrap();
        w.end_array().unwrap();
        w.end_array().unwrap();
        assert_eq!(text(w), "[\n  {},\n  []\n]");
    }

    #[test]
    fn a_nested_writer_splices_into_an_enclosing_document() {
        let mut whole = indented();
        whole.begin_object().unwrap();
        whole.key("a").unwrap();
        whole.begin_array().unwrap();
        whole.i64(1).unwrap();
        whole.begin_object().unwrap();
        whole.end_object().unwrap();
        whole.end_array().unwrap();
        whole.end_object().unwrap();

        let mut part = Vec::from(&b"{\n  \"a\": "[..]);
        let mut nested = JsonWriter::nested(&mut part, Style::Indented, 1);
        nested.begin_array().unwrap();
        nested.i64(1).unwrap();
        nested.begin_object().unwrap();
        nested.end_object().unwrap();
        nested.end_array().unwrap();
        nested.finish().unwrap();
        part.extend_from_slice(b"\n}");
        assert_eq!(text(whole), String::from_utf8(part).unwrap());
    }

    #[test]
    fn a_scalar_is_a_whole_document() {
        let mut w = indented();
        w.string_bytes(b"a\xffb").unwrap();
        assert_eq!(text(w), "\"a\\ufffdb\"");
    }

    #[test]
    fn times_and_uuids_are_the_strings_of_their_text() {
        let at = chrono::NaiveDate::from_ymd_opt(2026, 7, 13)
            .and_then(|d| d.and_hms_nano_opt(18, 4, 11, 200_000_000))
            .unwrap();
        let far = chrono::NaiveDate::from_ymd_opt(10_000, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .unwrap();
        let uuids = [
            ([0u8; 16], "00000000-0000-0000-0000-000000000000"),
            ([0xff; 16], "ffffffff-ffff-ffff-ffff-ffffffffffff"),
            (
                [
                    0x67, 0xe5, 0x50, 0x44, 0x10, 0xb1, 0x42, 0x6f, 0x92, 0x47, 0xbb, 0x68, 0x0e,
                    0x5f, 0xe0, 0xc8,
                ],
                "67e55044-10b1-426f-9247-bb680e5fe0c8",
            ),
        ];
        let mut typed = JsonWriter::new(Vec::new(), Style::Compact);
        let mut plain = JsonWriter::new(Vec::new(), Style::Compact);
        typed.begin_array().unwrap();
        plain.begin_array().unwrap();
        for time in [GoTime::new(at), GoTime::new(far)] {
            typed.time(&time).unwrap();
            plain.string(time.as_str()).unwrap();
        }
        for (bytes, text) in uuids {
            typed.uuid(&bytes).unwrap();
            plain.string(text).unwrap();
        }
        typed.end_array().unwrap();
        plain.end_array().unwrap();
        assert_eq!(text(typed), text(plain));
    }

    #[test]
    fn key_bytes_replace_invalid_utf8() {
        let mut w = JsonWriter::new(Vec::new(), Style::Compact);
        w.begin_object().unwrap();
        w.key_bytes(b"k\xc3").unwrap();
        w.i64(-7).unwrap();
        w.end_object().unwrap();
        assert_eq!(text(w), "{\"k\\ufffd\":-7}");
    }

    fn assert_misuse(result: Result<()>) {
        match result {
            Err(e) => assert!(e.is_misuse(), "{e:?}"),
            Ok(()) => panic!("misuse was accepted"),
        }
    }

    #[test]
    fn a_value_where_a_key_is_expected_is_misuse() {
        let mut w = indented();
        w.begin_object().unwrap();
        assert_misuse(w.i64(1));
        assert_misuse(w.begin_array());
        assert_misuse(w.end_array());
        // Nothing was written by the refused calls; the document can still be completed.
        w.end_object().unwrap();
        assert_eq!(text(w), "{}");
    }

    #[test]
    fn keys_outside_objects_and_twice_in_a_row_are_misuse() {
        let mut w = indented();
        assert_misuse(w.key("top"));
        w.begin_array().unwrap();
        assert_misuse(w.key("in array"));
        w.begin_object().unwrap();
        w.key("k").unwrap();
        assert_misuse(w.key("again"));
        assert_misuse(w.end_object());
        w.null().unwrap();
        w.end_object().unwrap();
        w.end_array().unwrap();
        assert_eq!(text(w), "[\n  {\n    \"k\": null\n  }\n]");
    }

    #[test]
    fn ends_without_begins_and_mismatched_ends_are_misuse() {
        let mut w = indented();
        assert_misuse(w.end_object());
        assert_misuse(w.end_array());
        w.begin_array().unwrap();
        assert_misuse(w.end_object());
        w.end_array().unwrap();
        assert_misuse(w.end_array());
    }

    #[test]
    fn a_second_top_level_value_is_misuse() {
        let mut w = indented();
        w.null().unwrap();
        assert_misuse(w.null());
        assert_misuse(w.begin_object());
        assert_eq!(text(w), "null");
    }

    #[test]
    fn finishing_an_incomplete_document_is_misuse() {
        assert!(indented().finish().unwrap_err().is_misuse());
        let mut w = indented();
        w.begin_object().unwrap();
        assert!(w.finish().unwrap_err().is_misuse());
    }

    #[test]
    fn non_finite_floats_are_refused_and_write_nothing() {
        let mut w = indented();
        w.begin_array().unwrap();
        for f in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(matches!(w.f64(f), Err(JsonError::NonFiniteFloat(_))));
        }
        w.f64(1e21).unwrap();
        w.f64(1e-7).unwrap();
        w.end_array().unwrap();
        assert_eq!(text(w), "[\n  1e+21,\n  1e-7\n]");
    }

    #[test]
    fn io_errors_are_returned_not_panicked() {
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut w = JsonWriter::new(Broken, Style::Indented);
        assert!(matches!(w.begin_object(), Err(JsonError::Io(_))));
    }
}

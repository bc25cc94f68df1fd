//! Object keys escaped once and written as raw bytes: a table's column names repeat on every
//! row, so escaping them and laying out their separators per row is work done once per table.

use super::escape;
use super::style::Style;

/// A member's key as it appears inside an object at one nesting depth in one [`Style`]: the
/// separator (`,` and, indented, the newline and indentation), the quoted key escaped as Go
/// escapes it, and what goes between the key and its value. Written by
/// [`JsonWriter::encoded_key`](super::JsonWriter::encoded_key), which checks that the writer is
/// at that depth in that style, so the bytes are the ones [`JsonWriter::key`](super::JsonWriter::key)
/// would write there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedKey {
    /// `,` + what precedes the key + the key: the first member of an object skips the comma.
    bytes: Box<[u8]>,
    style: Style,
    depth: usize,
}

impl EncodedKey {
    /// `key` for a member of an object whose members sit at nesting `depth` (1 = a member of
    /// the top-level object; [`JsonWriter::member_depth`](super::JsonWriter::member_depth) tells
    /// a writer's).
    pub fn new(key: &str, style: Style, depth: usize) -> EncodedKey {
        let mut bytes = Vec::with_capacity(key.len() + 8 + 2 * depth);
        // The writer only fails on I/O; a Vec never does.
        let _ = style.write_item_prefix(&mut bytes, false, depth);
        let _ = escape::write_str(&mut bytes, key, style.key_close());
        EncodedKey {
            bytes: bytes.into_boxed_slice(),
            style,
            depth,
        }
    }

    /// The bytes to write: `first` is whether the key opens its object (no comma before it).
    #[inline]
    pub(crate) fn bytes(&self, first: bool) -> &[u8] {
        &self.bytes[usize::from(first)..]
    }

    #[inline]
    pub(crate) fn fits(&self, style: Style, depth: usize) -> bool {
        self.style == style && self.depth == depth
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::JsonWriter;

    /// The same object written with `key` and with `encoded_key`.
    fn both(style: Style, depth: usize, keys: &[&str]) -> (Vec<u8>, Vec<u8>) {
        let write = |encoded: bool| {
            let mut w = JsonWriter::nested(Vec::new(), style, depth - 1);
            w.begin_object().unwrap();
            assert_eq!(w.member_depth(), depth);
            for (i, key) in keys.iter().enumerate() {
                if encoded {
                    w.encoded_key(&EncodedKey::new(key, style, depth)).unwrap();
                } else {
                    w.key(key).unwrap();
                }
                w.i64(i as i64).unwrap();
            }
            w.end_object().unwrap();
            w.finish().unwrap()
        };
        (write(false), write(true))
    }

    #[test]
    fn encoded_keys_write_what_key_writes() {
        let keys = [
            "id",
            "a<b>&c",
            "quo\"te\\",
            "line\u{2028}sep",
            "tab\there",
            "café",
            "",
        ];
        for style in [Style::Compact, Style::Indented] {
            for depth in [1, 4, 40] {
                let (plain, encoded) = both(style, depth, &keys);
                assert_eq!(
                    String::from_utf8(plain).unwrap(),
                    String::from_utf8(encoded).unwrap(),
                    "{style:?} at depth {depth}"
                );
            }
        }
    }

    #[test]
    fn a_key_encoded_for_another_depth_or_style_is_misuse_and_writes_nothing() {
        let mut w = JsonWriter::new(Vec::new(), Style::Indented);
        w.begin_object().unwrap();
        for key in [
            EncodedKey::new("k", Style::Indented, 2),
            EncodedKey::new("k", Style::Compact, 1),
        ] {
            assert!(w.encoded_key(&key).unwrap_err().is_misuse());
        }
        w.encoded_key(&EncodedKey::new("k", Style::Indented, 1))
            .unwrap();
        assert!(w
            .encoded_key(&EncodedKey::new("again", Style::Indented, 1))
            .unwrap_err()
            .is_misuse());
        w.null().unwrap();
        w.end_object().unwrap();
        assert_eq!(
            String::from_utf8(w.finish().unwrap()).unwrap(),
            "{\n  \"k\": null\n}"
        );
    }
}

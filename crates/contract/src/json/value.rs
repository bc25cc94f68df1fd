//! Whole `serde_json::Value`s written Go-style (keys sorted), and the one-call helpers.

use std::io::Write;

use serde_json::{Map, Number, Value};

use super::error::Result;
use super::style::Style;
use super::writer::JsonWriter;

/// An object's members in byte order of their keys.
enum Members<'a> {
    /// The map already iterates in byte order (serde_json's default `BTreeMap`).
    InOrder(serde_json::map::Iter<'a>),
    /// The map iterates in insertion order (serde_json's `preserve_order` feature): sorted copy.
    Sorted(std::vec::IntoIter<(&'a String, &'a Value)>),
}

impl<'a> Members<'a> {
    fn of(map: &'a Map<String, Value>) -> Self {
        // `str`'s `Ord` is byte order, which is the order Go sorts map keys in.
        if map.keys().is_sorted() {
            return Members::InOrder(map.iter());
        }
        Members::sorted(map.iter())
    }

    fn sorted(members: impl Iterator<Item = (&'a String, &'a Value)>) -> Self {
        let mut members: Vec<_> = members.collect();
        // Keys of one map are distinct, so an unstable sort is deterministic.
        members.sort_unstable_by(|a, b| a.0.cmp(b.0));
        Members::Sorted(members.into_iter())
    }

    fn next(&mut self) -> Option<(&'a String, &'a Value)> {
        match self {
            Members::InOrder(iter) => iter.next(),
            Members::Sorted(iter) => iter.next(),
        }
    }
}

/// A container of the value being written, with what remains of it.
enum Open<'a> {
    Array(std::slice::Iter<'a, Value>),
    Object(Members<'a>),
}

impl<W: Write> JsonWriter<W> {
    /// Writes a whole value at the current position (top level, array element, or after a key),
    /// nested at the current indentation, with object keys sorted by byte order as Go sorts map
    /// keys. Integers stay exact; other numbers are written as Go writes a `float64`.
    ///
    /// Deeply nested values are walked with an explicit stack, not recursion, so no depth can
    /// overflow the thread's stack.
    pub fn value(&mut self, value: &Value) -> Result<()> {
        let mut open: Vec<Open<'_>> = Vec::new();
        self.enter(value, &mut open)?;
        while let Some(top) = open.last_mut() {
            let next = match top {
                Open::Array(elements) => elements.next().map(|element| (None, element)),
                Open::Object(members) => members.next().map(|(k, v)| (Some(k), v)),
            };
            match next {
                Some((key, child)) => {
                    if let Some(key) = key {
                        self.key(key)?;
                    }
                    self.enter(child, &mut open)?;
                }
                None => {
                    match open.pop() {
                        Some(Open::Array(_)) => self.end_array()?,
                        _ => self.end_object()?,
                    };
                }
            }
        }
        Ok(())
    }

    /// Writes a scalar, or opens a container and pushes it for [`JsonWriter::value`] to fill.
    fn enter<'a>(&mut self, value: &'a Value, open: &mut Vec<Open<'a>>) -> Result<()> {
        match value {
            Value::Null => self.null(),
            Value::Bool(b) => self.bool(*b),
            Value::Number(n) => self.number(n),
            Value::String(s) => self.string(s),
            Value::Array(elements) => {
                self.begin_array()?;
                open.push(Open::Array(elements.iter()));
                Ok(())
            }
            Value::Object(map) => {
                self.begin_object()?;
                open.push(Open::Object(Members::of(map)));
                Ok(())
            }
        }
    }

    fn number(&mut self, n: &Number) -> Result<()> {
        if let Some(u) = n.as_u64() {
            self.u64(u)
        } else if let Some(i) = n.as_i64() {
            self.i64(i)
        } else {
            // A serde_json Number is always one of u64, i64 or a finite f64.
            self.f64(n.as_f64().unwrap_or(f64::NAN))
        }
    }
}

/// Serializes `value` as Go's `json.MarshalIndent(value, "", "  ")` does.
pub fn to_vec_indented(value: &Value) -> Result<Vec<u8>> {
    to_vec(value, Style::Indented)
}

/// Serializes `value` as Go's `json.Marshal(value)` does.
pub fn to_vec_compact(value: &Value) -> Result<Vec<u8>> {
    to_vec(value, Style::Compact)
}

/// Serializes `value` in `style` into a new buffer.
pub fn to_vec(value: &Value, style: Style) -> Result<Vec<u8>> {
    write(Vec::with_capacity(128), value, style)
}

/// Writes `value` as Go's `json.MarshalIndent(value, "", "  ")` does. Unbuffered sinks should be
/// wrapped in a `BufWriter`.
pub fn write_indented<W: Write>(out: W, value: &Value) -> Result<()> {
    write(out, value, Style::Indented).map(drop)
}

/// Writes `value` as Go's `json.Marshal(value)` does. Unbuffered sinks should be wrapped in a
/// `BufWriter`.
pub fn write_compact<W: Write>(out: W, value: &Value) -> Result<()> {
    write(out, value, Style::Compact).map(drop)
}

fn write<W: Write>(out: W, value: &Value, style: Style) -> Result<W> {
    let mut writer = JsonWriter::new(out, style);
    writer.value(value)?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn indented(value: &Value) -> String {
        String::from_utf8(to_vec_indented(value).unwrap()).unwrap()
    }

    #[test]
    fn object_keys_are_sorted_by_bytes() {
        let value = json!({"b": 1, "B": 2, "a": 3, "é": 4, "_": 5});
        assert_eq!(
            String::from_utf8(to_vec_compact(&value).unwrap()).unwrap(),
            "{\"B\":2,\"_\":5,\"a\":3,\"b\":1,\"é\":4}"
        );
    }

    #[test]
    fn members_in_insertion_order_come_out_sorted() {
        // With serde_json's `preserve_order` feature a Map iterates in insertion order.
        let map: Map<String, Value> = [("m", 1), ("z", 2), ("a", 3)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::from(v)))
            .collect();
        let mut sorted = Members::sorted(map.iter().rev());
        let mut keys = Vec::new();
        while let Some((k, _)) = sorted.next() {
            keys.push(k.as_str());
        }
        assert_eq!(keys, ["a", "m", "z"]);
    }

    #[test]
    fn a_value_nests_at_the_writer_position() {
        let mut w = JsonWriter::new(Vec::new(), Style::Indented);
        w.begin_array().unwrap();
        w.value(&json!({"k": [1, {}], "e": []})).unwrap();
        w.value(&json!(null)).unwrap();
        w.end_array().unwrap();
        let text = String::from_utf8(w.finish().unwrap()).unwrap();
        let expected =
            "[\n  {\n    \"e\": [],\n    \"k\": [\n      1,\n      {}\n    ]\n  },\n  null\n]";
        assert_eq!(text, expected);
    }

    #[test]
    fn a_value_where_a_key_is_expected_is_misuse() {
        let mut w = JsonWriter::new(Vec::new(), Style::Compact);
        w.begin_object().unwrap();
        assert!(w.value(&json!(1)).unwrap_err().is_misuse());
    }

    #[test]
    fn integral_floats_are_written_as_go_writes_float64() {
        assert_eq!(indented(&json!(123456789.0)), "123456789");
        assert_eq!(indented(&json!(-0.0)), "-0");
        assert_eq!(indented(&json!(1e21)), "1e+21");
        assert_eq!(indented(&json!(u64::MAX)), "18446744073709551615");
        assert_eq!(indented(&json!(i64::MIN)), "-9223372036854775808");
    }

    #[test]
    fn very_deep_values_do_not_overflow_the_stack() {
        let mut value = json!(0);
        for _ in 0..100_000 {
            value = Value::Array(vec![value]);
        }
        let out = to_vec_compact(&value).unwrap();
        assert_eq!(out.len(), 200_001);
        // Dropping a 100k-deep Value recurses in serde_json; forget it instead.
        std::mem::forget(value);
    }
}

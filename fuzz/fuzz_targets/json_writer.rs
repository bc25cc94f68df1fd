//! The Go-compatible JSON writer on arbitrary strings, keys and values: its output always parses
//! back, valid UTF-8 round-trips exactly, and a whole value round-trips in both styles.

#![no_main]

use arbitrary::{Arbitrary, Result, Unstructured};
use contract::json::{self, JsonWriter, Style};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Number, Value};

#[derive(Debug)]
struct ArbValue(Value);

fn value(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let kind = if depth >= 8 {
        u.int_in_range(0..=4)?
    } else {
        u.int_in_range(0..=6)?
    };
    Ok(match kind {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 => Value::Number(Number::from(u.arbitrary::<i64>()?)),
        3 => Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
        4 => Value::String(u.arbitrary()?),
        5 => {
            let n = u.int_in_range(0..=6)?;
            Value::Array((0..n).map(|_| value(u, depth + 1)).collect::<Result<_>>()?)
        }
        _ => {
            let n = u.int_in_range(0..=6)?;
            let mut map = Map::new();
            for _ in 0..n {
                map.insert(u.arbitrary()?, value(u, depth + 1)?);
            }
            Value::Object(map)
        }
    })
}

impl<'a> Arbitrary<'a> for ArbValue {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        value(u, 0).map(ArbValue)
    }
}

#[derive(Debug, Arbitrary)]
struct Input {
    key: Vec<u8>,
    string: Vec<u8>,
    u64_value: u64,
    f64_value: f64,
    value: ArbValue,
    raw: Vec<u8>,
}

fn string_bytes_round_trip(key: &[u8], string: &[u8], style: Style) {
    let mut writer = JsonWriter::new(Vec::new(), style);
    writer.begin_object().expect("object");
    writer.key_bytes(key).expect("key");
    writer.string_bytes(string).expect("string");
    writer.end_object().expect("end");
    let out = writer.finish().expect("finish");
    let text = std::str::from_utf8(&out).expect("the writer's output is UTF-8");
    assert!(
        !text.contains('<') && !text.contains('>') && !text.contains('&'),
        "HTML characters must be escaped as Go does"
    );
    let parsed: Value = serde_json::from_slice(&out).expect("the writer's output parses");
    let object = parsed.as_object().expect("an object");
    assert_eq!(object.len(), 1);
    let (k, v) = object.iter().next().expect("one member");
    if let (Ok(key), Ok(string)) = (std::str::from_utf8(key), std::str::from_utf8(string)) {
        assert_eq!(k, key);
        assert_eq!(v.as_str(), Some(string));
    } else {
        // Go replaces each invalid byte with U+FFFD: never more characters than bytes.
        assert!(k.chars().count() <= key.len());
        assert!(v.as_str().expect("a string").chars().count() <= string.len());
    }
}

/// Equality up to the number's JSON spelling: Go writes an integral float as an integer, which
/// reads back as one.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
                (Some(x), Some(y), _, _) => x == y,
                (_, _, Some(x), Some(y)) => x == y,
                _ => x.as_f64() == y.as_f64(),
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn value_round_trip(value: &Value) {
    for style in [Style::Compact, Style::Indented] {
        let out = json::to_vec(value, style).expect("a Value always writes");
        let back: Value = serde_json::from_slice(&out).expect("the writer's output parses");
        assert!(
            same(&back, value),
            "{style:?} output did not round-trip: {back} vs {value}"
        );
    }
}

fuzz_target!(|input: Input| {
    string_bytes_round_trip(&input.key, &input.string, Style::Compact);
    string_bytes_round_trip(&input.key, &input.string, Style::Indented);

    let mut writer = JsonWriter::new(Vec::new(), Style::Compact);
    writer.begin_array().expect("array");
    writer.u64(input.u64_value).expect("u64");
    if input.f64_value.is_finite() {
        writer.f64(input.f64_value).expect("f64");
    } else {
        // JSON has no NaN or infinity: the writer refuses them (the engine maps them to strings).
        assert!(writer.f64(input.f64_value).is_err());
        writer.null().expect("null");
    }
    writer.end_array().expect("end");
    let out = writer.finish().expect("finish");
    let back: Value = serde_json::from_slice(&out).expect("numbers parse");
    assert_eq!(back[0].as_u64(), Some(input.u64_value));
    if input.f64_value.is_finite() {
        assert_eq!(
            back[1].as_f64(),
            Some(input.f64_value),
            "{}",
            String::from_utf8_lossy(&out)
        );
    }

    value_round_trip(&input.value.0);
    // Raw bytes that happen to be JSON: whatever serde_json reads, the writer writes back.
    if let Ok(parsed) = serde_json::from_slice::<Value>(&input.raw) {
        value_round_trip(&parsed);
    }
});

//! The JSON writer against Go's `encoding/json`: recorded Go outputs byte for byte, and
//! properties (output parses back to the input; invalid UTF-8 follows Go's replacement rule).

use contract::json::{self, JsonWriter, Style};
use proptest::prelude::*;
use serde_json::Value;

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/vectors/go-json.json"
);

fn vectors() -> Value {
    let text = std::fs::read_to_string(VECTORS).expect("the go-json vector file is readable");
    serde_json::from_str(&text).expect("the go-json vector file is JSON")
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("the writer emits UTF-8")
}

fn field<'a>(case: &'a Value, name: &str) -> &'a str {
    case[name]
        .as_str()
        .unwrap_or_else(|| panic!("vector field {name} is a string"))
}

#[test]
fn every_case_matches_go_marshal_indent() {
    let vectors = vectors();
    let cases = vectors["cases"].as_array().expect("cases is an array");
    assert!(!cases.is_empty());
    for case in cases {
        let ours = text(json::to_vec_indented(&case["value"]).unwrap());
        assert_eq!(ours, field(case, "marshal_indent"), "case {}", case["name"]);
    }
}

#[test]
fn invalid_utf8_matches_go_replacement() {
    let vectors = vectors();
    let case = &vectors["invalid_utf8"];
    let hex = field(case, "bytes_hex");
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("bytes_hex is hex"))
        .collect();
    for style in [Style::Indented, Style::Compact] {
        let mut writer = JsonWriter::new(Vec::new(), style);
        writer.string_bytes(&bytes).unwrap();
        assert_eq!(
            text(writer.finish().unwrap()),
            field(case, "marshal_indent_of_string")
        );
    }
}

#[test]
fn compact_case_matches_go_marshal() {
    let vectors = vectors();
    let case = &vectors["compact"];
    let ours = text(json::to_vec_compact(&case["value"]).unwrap());
    assert_eq!(ours, field(case, "marshal"));
}

#[test]
fn streamed_rows_give_the_same_bytes_as_the_value_path() {
    let vectors = vectors();
    let case = vectors["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|case| case["name"] == "shape")
        .expect("the vector file has a shape case");
    let rows = case["value"]["pg"]["users"].as_array().unwrap();
    // The extraction engine sorts the column names once, then streams rows in that order.
    let mut columns = vec!["name", "id"];
    columns.sort_unstable();

    let mut writer = JsonWriter::new(Vec::new(), Style::Indented);
    writer.begin_object().unwrap();
    writer.key("pg").unwrap();
    writer.begin_object().unwrap();
    writer.key("users").unwrap();
    writer.begin_array().unwrap();
    for row in rows {
        writer.begin_object().unwrap();
        for column in &columns {
            writer.key(column).unwrap();
            match &row[*column] {
                Value::Number(n) => writer.i64(n.as_i64().unwrap()).unwrap(),
                Value::String(s) => writer.string(s).unwrap(),
                other => panic!("unexpected column value {other}"),
            }
        }
        writer.end_object().unwrap();
    }
    writer.end_array().unwrap();
    writer.end_object().unwrap();
    writer.end_object().unwrap();
    let streamed = text(writer.finish().unwrap());

    assert_eq!(streamed, field(case, "marshal_indent"));
    assert_eq!(
        streamed,
        text(json::to_vec_indented(&case["value"]).unwrap())
    );
}

#[test]
fn a_json_column_is_embedded_at_the_row_indentation() {
    let column = serde_json::json!({"z": [true], "a": {}});
    let mut writer = JsonWriter::new(Vec::new(), Style::Indented);
    writer.begin_array().unwrap();
    writer.begin_object().unwrap();
    writer.key("doc").unwrap();
    writer.value(&column).unwrap();
    writer.end_object().unwrap();
    writer.end_array().unwrap();
    let expected =
        "[\n  {\n    \"doc\": {\n      \"a\": {},\n      \"z\": [\n        true\n      ]\n    }\n  }\n]";
    assert_eq!(text(writer.finish().unwrap()), expected);
}

// ---- properties ----

/// Characters that exercise every escaping rule, mixed with arbitrary ones.
fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        any::<char>(),
        (0u8..0x20).prop_map(char::from),
        prop::sample::select(vec![
            '"', '\\', '/', '<', '>', '&', '\u{7f}', '\u{80}', '\u{2027}', '\u{2028}', '\u{2029}',
            '\u{20ac}', '\u{fffd}', 'é', '日', '😀',
        ]),
    ]
}

fn arb_string() -> impl Strategy<Value = String> {
    prop::collection::vec(tricky_char(), 0..16).prop_map(String::from_iter)
}

fn arb_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        -1e7f64..1e7,
        prop::sample::select(vec![
            0.0,
            -0.0,
            1e21,
            // The floats just below the thresholds of Go's layout switch.
            f64::from_bits(1e21f64.to_bits() - 1),
            1e-6,
            f64::from_bits(1e-6f64.to_bits() - 1),
            1e-7,
            5e-324,
            f64::MAX,
            f64::MIN_POSITIVE,
        ]),
    ]
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        arb_f64().prop_map(Value::from),
        arb_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            prop::collection::vec((arb_string(), inner), 0..8)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// Equal as JSON data, numbers exactly: serde_json's `float_roundtrip` feature (enabled in the
/// workspace) parses float text to the nearest double, so the written digits must come back as
/// the same bits.
fn same(expected: &Value, parsed: &Value) -> bool {
    match (expected, parsed) {
        (Value::Number(a), Value::Number(b)) if a.is_f64() || b.is_f64() => {
            // An integral float is written without a fraction and may parse back as an integer.
            let (x, y) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            x == y && x.is_sign_negative() == y.is_sign_negative()
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, x)| b.get(k).is_some_and(|y| same(x, y)))
        }
        _ => expected == parsed,
    }
}

/// Go's decoding of arbitrary bytes, written independently of the crate: each well-formed UTF-8
/// sequence (Unicode Table 3-7) is one character; any other byte is one U+FFFD.
fn go_decode(bytes: &[u8]) -> String {
    let mut decoded = String::new();
    let mut i = 0;
    while i < bytes.len() {
        match decode_one(&bytes[i..]) {
            Some((c, len)) => {
                decoded.push(c);
                i += len;
            }
            None => {
                decoded.push('\u{fffd}');
                i += 1;
            }
        }
    }
    decoded
}

fn decode_one(bytes: &[u8]) -> Option<(char, usize)> {
    let lead = bytes[0];
    let (len, min, bits) = match lead {
        0x00..=0x7f => return Some((char::from(lead), 1)),
        0xc2..=0xdf => (2, 0x80, lead & 0x1f),
        0xe0..=0xef => (3, 0x800, lead & 0x0f),
        0xf0..=0xf4 => (4, 0x1_0000, lead & 0x07),
        _ => return None,
    };
    let tail = bytes.get(1..len)?;
    let mut code = u32::from(bits);
    for &byte in tail {
        if byte & 0xc0 != 0x80 {
            return None;
        }
        code = code << 6 | u32::from(byte & 0x3f);
    }
    if code < min {
        return None; // overlong
    }
    char::from_u32(code).map(|c| (c, len)) // rejects surrogates and code points past U+10FFFF
}

/// Go's float text computed from first principles, independently of the crate: the exact
/// decimal expansion of the float (big-number arithmetic), then the fewest significant digits
/// that parse back to the same float, the closest such candidate, exact ties to even (what
/// Go's Ryū in `strconv/ftoaryu.go` produces), laid out as `encoding/json` does.
fn go_float_reference(f: f64) -> String {
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0");
    }
    let (exact, point) = exact_decimal(f.abs());
    let (digits, point) = (1..=exact.len())
        .find_map(|n| shortest_candidate(f.abs(), &exact, point, n))
        .expect("the exact expansion itself round-trips");
    let digits: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
    let abs = f.abs();
    if (1e-6..1e21).contains(&abs) {
        if point <= 0 {
            let zeros = "0".repeat(point.unsigned_abs() as usize);
            return format!("{sign}0.{zeros}{digits}");
        }
        let point = point as usize;
        if point >= digits.len() {
            format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
        } else {
            format!("{sign}{}.{}", &digits[..point], &digits[point..])
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let exponent = point - 1;
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{sign}{first}{dot}{rest}e{exp_sign}{:02}",
            exponent.unsigned_abs()
        )
        .replace("e-0", "e-")
    }
}

/// The exact value of a positive finite float as decimal digits `d` and `point`:
/// value = 0.d × 10^point. A float is m × 2^e; for e < 0 that is m × 5^-e / 10^-e.
fn exact_decimal(f: f64) -> (Vec<u8>, i32) {
    let bits = f.to_bits();
    let biased = (bits >> 52) as i32;
    let fraction = bits & ((1 << 52) - 1);
    let (mantissa, exponent) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | 1 << 52, biased - 1075)
    };
    // Little-endian base-1e9 limbs.
    let mut limbs: Vec<u64> = vec![mantissa % 1_000_000_000, mantissa / 1_000_000_000];
    let multiply = |limbs: &mut Vec<u64>, factor: u64| {
        let mut carry = 0;
        for limb in limbs.iter_mut() {
            let product = *limb * factor + carry;
            *limb = product % 1_000_000_000;
            carry = product / 1_000_000_000;
        }
        while carry > 0 {
            limbs.push(carry % 1_000_000_000);
            carry /= 1_000_000_000;
        }
    };
    let (base, mut count, shift) = if exponent >= 0 {
        (2, exponent, 0)
    } else {
        (5, -exponent, -exponent)
    };
    while count > 0 {
        let step = count.min(12);
        multiply(&mut limbs, u64::pow(base, step as u32));
        count -= step;
    }
    let mut text = String::new();
    for limb in limbs.iter().rev() {
        text.push_str(&format!("{limb:09}"));
    }
    let all: Vec<u8> = text.bytes().map(|b| b - b'0').collect();
    let first = all.iter().position(|&d| d != 0).expect("nonzero");
    let mut digits = all[first..].to_vec();
    let point = digits.len() as i32 - shift;
    while digits.last() == Some(&0) {
        digits.pop();
    }
    (digits, point)
}

/// The n-digit candidate Go would print for `f`, if any n-digit decimal parses back to `f`:
/// the truncation T and T + 1 unit bracket the exact value; try the closer one first.
fn shortest_candidate(f: f64, exact: &[u8], point: i32, n: usize) -> Option<(Vec<u8>, i32)> {
    let truncated = exact[..n.min(exact.len())].to_vec();
    if n >= exact.len() {
        return Some((truncated, point));
    }
    let rest = &exact[n..];
    let up_is_closer = match rest[0].cmp(&5) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal if rest[1..].iter().any(|&d| d != 0) => true,
        std::cmp::Ordering::Equal => truncated[n - 1] % 2 == 1, // exact tie: to even
    };
    let mut incremented = truncated.clone();
    let mut up_point = point;
    let mut i = n;
    loop {
        if i == 0 {
            incremented.insert(0, 1);
            incremented.pop();
            up_point += 1;
            break;
        }
        i -= 1;
        if incremented[i] == 9 {
            incremented[i] = 0;
        } else {
            incremented[i] += 1;
            break;
        }
    }
    let candidates = if up_is_closer {
        [(incremented, up_point), (truncated, point)]
    } else {
        [(truncated, point), (incremented, up_point)]
    };
    candidates.into_iter().find_map(|(mut digits, point)| {
        let text: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
        let parsed: f64 = format!("0.{text}e{point}").parse().ok()?;
        while digits.last() == Some(&0) {
            digits.pop();
        }
        (parsed == f).then_some((digits, point))
    })
}

fn ours_f64(f: f64) -> String {
    let mut writer = JsonWriter::new(Vec::new(), Style::Compact);
    writer.f64(f).unwrap();
    text(writer.finish().unwrap())
}

#[test]
// The tie literal spells the exact binary value, which is the point of that case.
#[allow(clippy::excessive_precision)]
fn the_float_reference_agrees_with_known_go_outputs() {
    // From the vector file's "floats" case and Go's documented behaviour.
    for (f, go) in [
        (1.5, "1.5"),
        (1e16, "10000000000000000"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (123456789.0, "123456789"),
        (-0.0, "-0"),
        (0.1, "0.1"),
        (2.5e-8, "2.5e-8"),
        (5e-324, "5e-324"),
        (f64::MAX, "1.7976931348623157e+308"),
        // An exact tie between two 17-digit candidates: Go's Ryū rounds it to even.
        (1394865425023536.25, "1394865425023536.2"),
    ] {
        assert_eq!(go_float_reference(f), go, "reference for {f:e}");
        assert_eq!(ours_f64(f), go, "writer for {f:e}");
    }
}

#[test]
fn floats_match_the_exact_reference_across_the_range() {
    // xorshift64*: deterministic bit patterns covering every exponent, plus values with short
    // binary fractions (k / 2^s), where exact ties between shortest candidates happen.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for _ in 0..20_000 {
        let bits = f64::from_bits(next());
        let dyadic = (next() >> 11) as f64 / f64::from(1u32 << (next() % 12));
        for f in [bits, dyadic, -dyadic] {
            if f.is_finite() {
                assert_eq!(ours_f64(f), go_float_reference(f), "{:#x}", f.to_bits());
            }
        }
    }
}

fn arb_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        any::<u8>().prop_map(|b| vec![b]),
        arb_string().prop_map(String::into_bytes),
        // Fragments of multi-byte sequences, surrogates and overlongs.
        prop::sample::select(vec![
            vec![0xe2, 0x80],
            vec![0xe2, 0x80, 0xa8],
            vec![0xed, 0xa0, 0x80],
            vec![0xc0, 0xaf],
            vec![0xf4, 0x90, 0x80, 0x80],
            vec![0xf0, 0x9f, 0x98],
            vec![0x80],
            vec![0xff],
        ]),
    ];
    prop::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
}

/// Bytes Go never leaves raw in a string: controls, `<` `>` `&`, U+2028/U+2029.
fn assert_go_safe(output: &[u8]) {
    for (i, &b) in output.iter().enumerate() {
        assert!(b >= 0x20 && !b"<>&".contains(&b), "raw {b:#04x} at {i}");
    }
    let text = std::str::from_utf8(output).expect("output is UTF-8");
    assert!(!text.contains(['\u{2028}', '\u{2029}']));
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        // Failures are reported with their minimal input; no regression file is written.
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn values_round_trip_through_both_styles(value in arb_value()) {
        for style in [Style::Compact, Style::Indented] {
            let output = json::to_vec(&value, style).unwrap();
            let parsed: Value = serde_json::from_slice(&output).unwrap();
            prop_assert!(same(&value, &parsed), "{:?}: {}", style, text(output));
        }
    }

    #[test]
    fn indented_is_compact_plus_go_whitespace(value in arb_value()) {
        let compact = json::to_vec_compact(&value).unwrap();
        let indented = json::to_vec_indented(&value).unwrap();
        // Strings never hold a raw newline, and Go's indentation only adds '\n', spaces and a
        // space after each ':' outside strings; removing those gives the compact bytes.
        let mut stripped = Vec::with_capacity(indented.len());
        let mut in_string = false;
        let mut escaped = false;
        for &b in &indented {
            if in_string {
                stripped.push(b);
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
            } else if b != b'\n' && b != b' ' {
                in_string = b == b'"';
                stripped.push(b);
            }
        }
        prop_assert_eq!(text(stripped), text(compact));
    }

    #[test]
    fn strings_are_escaped_go_safe(s in arb_string()) {
        let mut writer = JsonWriter::new(Vec::new(), Style::Compact);
        writer.string(&s).unwrap();
        let output = writer.finish().unwrap();
        assert_go_safe(&output);
        let parsed: String = serde_json::from_slice(&output).unwrap();
        prop_assert_eq!(parsed, s);
    }

    #[test]
    fn byte_strings_follow_go_replacement(bytes in arb_bytes()) {
        let mut writer = JsonWriter::new(Vec::new(), Style::Indented);
        writer.string_bytes(&bytes).unwrap();
        let output = writer.finish().unwrap();
        assert_go_safe(&output);
        let parsed: String = serde_json::from_slice(&output).unwrap();
        prop_assert_eq!(parsed, go_decode(&bytes));
    }

    #[test]
    fn any_byte_string_follows_go_replacement(bytes in any::<Vec<u8>>()) {
        let mut writer = JsonWriter::new(Vec::new(), Style::Compact);
        writer.string_bytes(&bytes).unwrap();
        let parsed: String = serde_json::from_slice(&writer.finish().unwrap()).unwrap();
        prop_assert_eq!(parsed, go_decode(&bytes));
    }

    #[test]
    fn floats_round_trip_exactly_in_go_layout(f in arb_f64()) {
        let mut writer = JsonWriter::new(Vec::new(), Style::Compact);
        writer.f64(f).unwrap();
        let output = text(writer.finish().unwrap());
        // std's parser is correctly rounded: the shortest digits must give back the same bits.
        prop_assert_eq!(output.parse::<f64>().unwrap().to_bits(), f.to_bits(), "{}", output);
        let abs = f.abs();
        let plain = abs == 0.0 || (1e-6..1e21).contains(&abs);
        match output.split_once('e') {
            None => prop_assert!(plain, "{} should use an exponent", output),
            Some((mantissa, exponent)) => {
                prop_assert!(!plain, "{} should be plain", output);
                let digits = exponent.strip_prefix(['+', '-']).unwrap_or("");
                let sign = if abs >= 1.0 { '+' } else { '-' };
                prop_assert!(exponent.starts_with(sign), "{}", output);
                prop_assert!(!digits.is_empty() && !digits.starts_with('0'), "{}", output);
                prop_assert!(!mantissa.ends_with('.') && !mantissa.ends_with(".0"));
            }
        }
    }

    #[test]
    fn floats_match_the_exact_reference(bits in any::<u64>()) {
        let f = f64::from_bits(bits);
        prop_assume!(f.is_finite());
        prop_assert_eq!(ours_f64(f), go_float_reference(f));
    }

    #[test]
    fn integers_are_exact(i in any::<i64>(), u in any::<u64>()) {
        let value = serde_json::json!([i, u]);
        prop_assert_eq!(text(json::to_vec_compact(&value).unwrap()), format!("[{i},{u}]"));
    }
}

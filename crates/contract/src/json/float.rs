//! Float formatting: shortest round-trip digits in the layout of Go's `encoding/json`.

use std::io::Write as _;

use super::integer::{format_u64, IntBuf};

/// Room for any finite `f64` (or `f32`) in either layout: at most 17 significant digits plus 21 integer
/// digits or 5 leading fractional zeros, a sign, a point and a five-character exponent.
const FLOAT_CAPACITY: usize = 48;

/// At most 17 significant digits make a shortest round-trip `f64`; room is left for a formatter
/// that pads.
const MAX_DIGITS: usize = 32;

/// A stack buffer holding one formatted float.
pub(crate) struct FloatBuf {
    bytes: [u8; FLOAT_CAPACITY],
    len: usize,
}

impl FloatBuf {
    pub(crate) fn new() -> Self {
        FloatBuf {
            bytes: [0; FLOAT_CAPACITY],
            len: 0,
        }
    }

    /// Appends `text`; `None` if it does not fit (it always does for a finite `f64`).
    fn push(&mut self, text: &[u8]) -> Option<()> {
        let end = self.len + text.len();
        self.bytes.get_mut(self.len..end)?.copy_from_slice(text);
        self.len = end;
        Some(())
    }

    fn push_zeros(&mut self, count: usize) -> Option<()> {
        for _ in 0..count {
            self.push(b"0")?;
        }
        Some(())
    }
}

/// A finite float as shortest decimal digits: the value is `0.DIGITS × 10^point`, negated when
/// `negative`. Zero has no digits.
struct Decimal {
    negative: bool,
    digits: [u8; MAX_DIGITS],
    len: usize,
    point: i32,
}

/// Formats a float like Go's `encoding/json`, or returns `None` for NaN and infinities.
///
/// Go writes the shortest digits that round-trip, in plain decimal when `1e-6 <= |f| < 1e21` or
/// `f == 0` (`-0` for negative zero), otherwise in exponent form with a signed exponent and no
/// leading zero (`1e+21`, `2.5e-8`, `1e-100`).
pub(crate) fn format_f64(f: f64, buf: &mut FloatBuf) -> Option<&[u8]> {
    use serde_json::ser::{CompactFormatter, Formatter as _};

    if !f.is_finite() {
        return None;
    }
    let abs = f.abs();
    let plain = abs == 0.0 || (1e-6..1e21).contains(&abs);
    lay_out(
        buf,
        plain,
        |out| CompactFormatter.write_f64(out, f),
        |out| write!(out, "{f:e}"),
    )
}

/// Formats a single-precision float as Go's `encoding/json` formats a `float32`, or returns
/// `None` for NaN and infinities: the shortest digits that round-trip *as a float32*
/// (`strconv.FormatFloat(float64(f), fmt, -1, 32)`), so `0.1` rather than the
/// `0.10000000149011612` of the widened double.
///
/// The layout is [`format_f64`]'s, with encoding/json's cut-offs compared in single precision:
/// `float32(1e-6)` (9.99999997e-7) is written `0.000001`, where the double 1e-6 is the cut-off
/// for a `float64`.
pub(crate) fn format_f32(f: f32, buf: &mut FloatBuf) -> Option<&[u8]> {
    use serde_json::ser::{CompactFormatter, Formatter as _};

    if !f.is_finite() {
        return None;
    }
    let abs = f.abs();
    let plain = abs == 0.0 || (1e-6f32..1e21f32).contains(&abs);
    lay_out(
        buf,
        plain,
        |out| CompactFormatter.write_f32(out, f),
        |out| write!(out, "{f:e}"),
    )
}

/// Writes into `buf` the digits `shortest` produces, laid out as Go does (`plain` or exponent
/// form). `shortest` is serde_json's formatter (`zmij`); its layout is not Go's, so the digits are
/// re-laid out.
///
/// Go's digits, for both widths (`strconv.FormatFloat(x, fmt, -1, bitSize)`, which since Go 1.17
/// always takes `ryuFtoaShortest` in `strconv/ftoaryu.go`, with `float32info` for a `float32`):
/// the fewest significant digits of any decimal inside the value's rounding interval (its ends
/// included only when the binary mantissa is even), and of those the one nearest the exact
/// value, an exact tie going to the even last digit. zmij chooses the same way; that this holds
/// is not assumed but checked against Go itself: `tests/go_reference.rs` compares random samples
/// of both widths on every `make test`, and every one of the 2³² `f32` bit patterns once
/// (BENCHMARKS.md, 0 mismatches); `tests/go_json.rs` checks `f64` against an exact big-number
/// reference of the rule.
///
/// `core::fmt` is not used for the digits: it breaks exact ties the other way
/// (`1394865425023536.25` → `...536.3`, Go `...536.2`; the `f32` `-3626911.25` → `-3626911.3`,
/// Go `-3626911.2`) and is about three times slower (~70 ns per float against ~22). It is only
/// the `fallback`, if serde_json's text were ever unreadable.
fn lay_out(
    buf: &mut FloatBuf,
    plain: bool,
    shortest: impl FnOnce(&mut &mut [u8]) -> std::io::Result<()>,
    fallback: impl FnOnce(&mut &mut [u8]) -> std::io::Result<()>,
) -> Option<&[u8]> {
    buf.len = 0;
    // The shortest digits go straight into `buf`: when they are Go's text already (the common
    // case) they are answered where they lie, without a copy.
    if let Some(len) = written(&mut buf.bytes, shortest) {
        let shortest = &buf.bytes[..len];
        let go_len = if plain {
            canonical_plain(shortest).map(<[u8]>::len)
        } else {
            None
        };
        if let Some(go_len) = go_len {
            buf.len = go_len;
            return Some(&buf.bytes[..go_len]);
        }
        if let Some(decimal) = parse_decimal(shortest) {
            write_decimal(buf, &decimal, plain)?;
            return Some(&buf.bytes[..buf.len]);
        }
    }
    let mut text = [0u8; FLOAT_CAPACITY];
    let len = written(&mut text, fallback)?;
    let decimal = parse_decimal(&text[..len])?;
    write_decimal(buf, &decimal, plain)?;
    Some(&buf.bytes[..buf.len])
}

/// How many bytes `write` puts at the start of `text`; `None` if it fails (the text does not
/// fit).
fn written(
    text: &mut [u8; FLOAT_CAPACITY],
    write: impl FnOnce(&mut &mut [u8]) -> std::io::Result<()>,
) -> Option<usize> {
    let mut cursor: &mut [u8] = text;
    write(&mut cursor).ok()?;
    Some(FLOAT_CAPACITY - cursor.len())
}

/// The fast path: when `text` is a canonical plain decimal (no exponent, no redundant zeros),
/// it is Go's plain layout already, but for the `.0` serde_json puts on integral values. The
/// answer is a prefix of `text`.
fn canonical_plain(text: &[u8]) -> Option<&[u8]> {
    let text = text.strip_suffix(b".0").unwrap_or(text);
    let unsigned = text.strip_prefix(b"-").unwrap_or(text);
    // One pass: every byte a digit or a point, and whether there is a point.
    let mut has_point = false;
    for &byte in unsigned {
        match byte {
            b'0'..=b'9' => {}
            b'.' => has_point = true,
            _ => return None,
        }
    }
    let redundant_zero = (has_point && unsigned.ends_with(b"0"))
        || (unsigned.len() > 1 && unsigned[0] == b'0' && unsigned[1] != b'.');
    (!unsigned.is_empty() && !redundant_zero).then_some(text)
}

/// Lays out parsed digits as Go does, in plain or exponent form.
fn write_decimal(buf: &mut FloatBuf, decimal: &Decimal, plain: bool) -> Option<()> {
    if decimal.negative {
        buf.push(b"-")?;
    }
    let digits = &decimal.digits[..decimal.len];
    if plain {
        write_plain(buf, digits, decimal.point)
    } else {
        write_exponent(buf, digits, decimal.point)
    }
}

/// Parses `-?DIGITS(.DIGITS)?([eE][+-]?DIGITS)?` into significant digits and a decimal point.
fn parse_decimal(text: &[u8]) -> Option<Decimal> {
    let (negative, rest) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (mantissa, exponent) = match rest.iter().position(|&b| b == b'e' || b == b'E') {
        Some(e) => (&rest[..e], parse_exponent(&rest[e + 1..])?),
        None => (rest, 0),
    };
    let mut decimal = Decimal {
        negative,
        digits: [0; MAX_DIGITS],
        len: 0,
        point: 0,
    };
    let mut seen_point = false;
    for &byte in mantissa {
        match byte {
            b'.' if !seen_point => seen_point = true,
            b'0'..=b'9' => {
                if byte == b'0' && decimal.len == 0 {
                    // A leading zero: before the point it carries nothing, after it it shifts
                    // the first significant digit one place right.
                    if seen_point {
                        decimal.point -= 1;
                    }
                    continue;
                }
                *decimal.digits.get_mut(decimal.len)? = byte;
                decimal.len += 1;
                if !seen_point {
                    decimal.point += 1;
                }
            }
            _ => return None,
        }
    }
    while decimal.len > 0 && decimal.digits[decimal.len - 1] == b'0' {
        decimal.len -= 1;
    }
    if decimal.len == 0 {
        decimal.point = 0;
    } else {
        decimal.point = decimal.point.checked_add(exponent)?;
    }
    Some(decimal)
}

fn parse_exponent(text: &[u8]) -> Option<i32> {
    let (negative, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 4 {
        return None;
    }
    let mut value = 0i32;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return None;
        }
        value = value * 10 + i32::from(byte - b'0');
    }
    Some(if negative { -value } else { value })
}

/// Go's `strconv.FormatFloat(f, 'f', -1, 64)` from the digits of `0.DIGITS × 10^point`.
fn write_plain(buf: &mut FloatBuf, digits: &[u8], point: i32) -> Option<()> {
    if digits.is_empty() {
        return buf.push(b"0");
    }
    if point <= 0 {
        buf.push(b"0.")?;
        buf.push_zeros(point.unsigned_abs() as usize)?;
        return buf.push(digits);
    }
    let point = point as usize;
    if point >= digits.len() {
        buf.push(digits)?;
        return buf.push_zeros(point - digits.len());
    }
    buf.push(&digits[..point])?;
    buf.push(b".")?;
    buf.push(&digits[point..])
}

/// Go's `strconv.FormatFloat(f, 'e', -1, 64)` with `encoding/json`'s clean-up of `e-09` to
/// `e-9`: `D[.DDD]e±X`, where a positive exponent keeps two digits and its `+`.
fn write_exponent(buf: &mut FloatBuf, digits: &[u8], point: i32) -> Option<()> {
    let (first, rest) = digits.split_first()?;
    buf.push(&[*first])?;
    if !rest.is_empty() {
        buf.push(b".")?;
        buf.push(rest)?;
    }
    let exponent = point - 1;
    buf.push(if exponent < 0 { b"e-" } else { b"e+" })?;
    let magnitude = u64::from(exponent.unsigned_abs());
    if exponent >= 0 && magnitude < 10 {
        buf.push(b"0")?;
    }
    let mut int = IntBuf::default();
    buf.push(format_u64(magnitude, &mut int))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(f: f64) -> String {
        let mut buf = FloatBuf::new();
        String::from_utf8(format_f64(f, &mut buf).unwrap().to_vec()).unwrap()
    }

    #[test]
    fn large_floats_use_exponent_with_plus_from_1e21() {
        assert_eq!(float(1e21), "1e+21");
        assert_eq!(float(-1e21), "-1e+21");
        assert_eq!(float(1e100), "1e+100");
        assert_eq!(float(1.5e300), "1.5e+300");
        assert_eq!(float(f64::MAX), "1.7976931348623157e+308");
        assert_eq!(float(999999999999999900000.0), "999999999999999900000");
        assert_eq!(float(1e20), "100000000000000000000");
    }

    #[test]
    fn small_floats_use_exponent_without_leading_zero_below_1e6() {
        assert_eq!(float(1e-7), "1e-7");
        assert_eq!(float(2.5e-8), "2.5e-8");
        assert_eq!(float(-1e-10), "-1e-10");
        assert_eq!(float(5e-324), "5e-324");
        assert_eq!(float(1e-6), "0.000001");
        assert_eq!(float(1.25e-6), "0.00000125");
    }

    #[test]
    fn ordinary_floats_are_plain_shortest_digits() {
        assert_eq!(float(1.5), "1.5");
        assert_eq!(float(0.1), "0.1");
        assert_eq!(float(123456789.0), "123456789");
        assert_eq!(float(1e16), "10000000000000000");
        assert_eq!(float(0.30000000000000004), "0.30000000000000004");
        assert_eq!(float(-2.0), "-2");
    }

    #[test]
    fn zero_keeps_its_sign() {
        assert_eq!(float(0.0), "0");
        assert_eq!(float(-0.0), "-0");
    }

    #[test]
    fn non_finite_floats_are_refused() {
        let mut buf = FloatBuf::new();
        assert!(format_f64(f64::NAN, &mut buf).is_none());
        assert!(format_f64(f64::INFINITY, &mut buf).is_none());
        assert!(format_f64(f64::NEG_INFINITY, &mut buf).is_none());
    }

    #[test]
    // The literals spell the exact binary values, which is the point of the test.
    #[allow(clippy::excessive_precision)]
    fn exact_ties_between_shortest_candidates_round_to_even_like_go() {
        // 1394865425023536.25 is exact in binary; 17 digits end in .2 or .3 at equal distance.
        // Go's Ryū rounds the tie to even (`strconv/ftoaryu.go`); core::fmt would write .3.
        assert_eq!(float(1394865425023536.25), "1394865425023536.2");
        assert_eq!(float(222507385850720.125), "222507385850720.12");
    }

    fn float32(f: f32) -> String {
        let mut buf = FloatBuf::new();
        String::from_utf8(format_f32(f, &mut buf).unwrap().to_vec()).unwrap()
    }

    #[test]
    fn single_precision_uses_its_own_shortest_digits() {
        assert_eq!(float32(0.1), "0.1");
        assert_eq!(float32(1.1), "1.1");
        assert_eq!(float32(16777216.0), "16777216");
        assert_eq!(float32(f32::MAX), "3.4028235e+38");
        assert_eq!(float32(f32::MIN_POSITIVE), "1.1754944e-38");
        assert_eq!(float32(f32::from_bits(1)), "1e-45");
        assert_eq!(float32(-0.0), "-0");
        assert!(format_f32(f32::NAN, &mut FloatBuf::new()).is_none());
    }

    #[test]
    // The literal spells the exact binary value, which is the point of the test.
    #[allow(clippy::excessive_precision)]
    fn single_precision_ties_round_to_even_like_go() {
        // -3626911.25 is exact in single precision; 8 digits end in .2 or .3 at equal distance.
        assert_eq!(float32(-3626911.25), "-3626911.2");
    }

    #[test]
    fn single_precision_cut_offs_are_compared_in_single_precision() {
        // float32(1e-6) is below the double 1e-6, yet encoding/json writes it plainly.
        assert_eq!(float32(1e-6), "0.000001");
        assert_eq!(
            float32(f32::from_bits(1e-6f32.to_bits() - 1)),
            "9.999999e-7"
        );
        assert_eq!(float32(1e21), "1e+21");
        assert_eq!(
            float32(f32::from_bits(1e21f32.to_bits() - 1)),
            "999999950000000000000"
        );
    }

    #[test]
    fn only_canonical_plain_text_takes_the_fast_path() {
        assert_eq!(canonical_plain(b"-0.0"), Some(&b"-0"[..]));
        assert_eq!(canonical_plain(b"123.0"), Some(&b"123"[..]));
        assert_eq!(canonical_plain(b"0.00012"), Some(&b"0.00012"[..]));
        assert_eq!(
            canonical_plain(b"1428.5724285714286"),
            Some(&b"1428.5724285714286"[..])
        );
        for not_canonical in [&b"1e21"[..], b"1.50", b"01.5", b"00", b"", b"-", b"1.5E3"] {
            assert_eq!(canonical_plain(not_canonical), None);
        }
    }

    #[test]
    fn decimal_text_in_any_layout_parses_to_digits_and_point() {
        let cases: [(&[u8], bool, &[u8], i32); 9] = [
            (b"0.0", false, b"", 0),
            (b"-0.0", true, b"", 0),
            (b"1e21", false, b"1", 22),
            (b"1.5e-7", false, b"15", -6),
            (b"123.0", false, b"123", 3),
            (b"0.00012", false, b"12", -3),
            (b"1E+5", false, b"1", 6),
            (b"-120.5", true, b"1205", 3),
            (b"100", false, b"1", 3),
        ];
        for (text, negative, digits, point) in cases {
            let decimal = parse_decimal(text).unwrap();
            assert_eq!(decimal.negative, negative);
            assert_eq!(&decimal.digits[..decimal.len], digits);
            assert_eq!(decimal.point, point, "{}", String::from_utf8_lossy(text));
        }
        for bad in [&b"1.2.3"[..], b"1e", b"x", b"1e+99999"] {
            assert!(parse_decimal(bad).is_none());
        }
    }

    #[test]
    fn longest_outputs_fit_the_buffer() {
        for f in [
            -1.2345678901234567e20,
            -1.2345678901234567e-6,
            -1.2345678901234567e-300,
            -f64::MIN_POSITIVE,
            // The largest subnormal.
            -f64::from_bits(0x000f_ffff_ffff_ffff),
        ] {
            let text = float(f);
            assert_eq!(text.parse::<f64>().unwrap(), f, "{text}");
        }
    }
}

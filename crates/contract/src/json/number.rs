//! Number formatting: integers digit-exact, floats the way Go's `encoding/json` float encoder
//! lays out the shortest round-trip digits.

use std::fmt::Write as _;

/// Digit pairs "00" to "99": two digits per division halves the divisions.
static DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Room for any `u64` (20 digits) or `i64` (sign + 19 digits).
pub(crate) type IntBuf = [u8; 20];

/// Formats `n` in decimal at the end of `buf` and returns the digits.
#[inline]
pub(crate) fn format_u64(mut n: u64, buf: &mut IntBuf) -> &[u8] {
    let mut pos = buf.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        pos -= 2;
        buf[pos..pos + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        pos -= 2;
        buf[pos..pos + 2].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
    } else {
        pos -= 1;
        buf[pos] = b'0' + n as u8;
    }
    &buf[pos..]
}

/// Formats `n` in decimal at the end of `buf` and returns the text.
#[inline]
pub(crate) fn format_i64(n: i64, buf: &mut IntBuf) -> &[u8] {
    let len = format_u64(n.unsigned_abs(), buf).len();
    let mut start = buf.len() - len;
    if n < 0 {
        // 19 digits at most for an i64 magnitude, so there is room for the sign.
        start -= 1;
        buf[start] = b'-';
    }
    &buf[start..]
}

/// Room for any finite `f64` in either layout: at most 17 significant digits plus 21 integer
/// digits or 6 leading fractional zeros, a sign, a point and a four-character exponent.
const FLOAT_CAPACITY: usize = 48;

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
}

impl std::fmt::Write for FloatBuf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        let slot = self.bytes.get_mut(self.len..end).ok_or(std::fmt::Error)?;
        slot.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Formats a float like Go's `encoding/json`, or returns `None` for NaN and infinities.
///
/// Go writes the shortest digits that round-trip, in plain decimal when `1e-6 <= |f| < 1e21` or
/// `f == 0` (`-0` for negative zero), otherwise in exponent form with a signed exponent of at
/// least one digit (`1e+21`, `2.5e-8`, `1e-100`). Rust's `Display` and `LowerExp` produce the
/// same shortest digits; only the exponent needs Go's explicit `+`.
pub(crate) fn format_f64(f: f64, buf: &mut FloatBuf) -> Option<&[u8]> {
    if !f.is_finite() {
        return None;
    }
    buf.len = 0;
    let abs = f.abs();
    let plain = abs == 0.0 || (1e-6..1e21).contains(&abs);
    // Cannot fail: FLOAT_CAPACITY holds the longest output of either form.
    let written = if plain {
        write!(buf, "{f}")
    } else {
        write!(buf, "{f:e}")
    };
    written.ok()?;
    if !plain {
        insert_exponent_plus(buf);
    }
    Some(&buf.bytes[..buf.len])
}

/// Turns Rust's `1e21` into Go's `1e+21`; negative exponents are already alike (`2.5e-8`).
fn insert_exponent_plus(buf: &mut FloatBuf) {
    let text = &buf.bytes[..buf.len];
    let Some(e) = text.iter().position(|&b| b == b'e') else {
        return;
    };
    if text.get(e + 1) == Some(&b'-') || buf.len == FLOAT_CAPACITY {
        return;
    }
    buf.bytes.copy_within(e + 1..buf.len, e + 2);
    buf.bytes[e + 1] = b'+';
    buf.len += 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(f: f64) -> String {
        let mut buf = FloatBuf::new();
        String::from_utf8(format_f64(f, &mut buf).unwrap().to_vec()).unwrap()
    }

    #[test]
    fn integers_match_std_at_the_edges() {
        let mut buf = IntBuf::default();
        for n in [0, 1, 9, 10, 99, 100, 101, 999, 1000, u64::MAX / 10, u64::MAX] {
            assert_eq!(format_u64(n, &mut buf), n.to_string().as_bytes());
        }
        for n in [0, -1, -9, -10, 42, -42, i64::MAX, i64::MIN, i64::MIN + 1] {
            assert_eq!(format_i64(n, &mut buf), n.to_string().as_bytes());
        }
    }

    #[test]
    fn powers_of_ten_format_like_std() {
        let mut buf = IntBuf::default();
        let mut n = 1u64;
        while let Some(next) = n.checked_mul(10) {
            assert_eq!(format_u64(n - 1, &mut buf), (n - 1).to_string().as_bytes());
            assert_eq!(format_u64(n, &mut buf), n.to_string().as_bytes());
            n = next;
        }
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
    fn longest_outputs_fit_the_buffer() {
        for f in [
            -1.2345678901234567e20,
            -1.2345678901234567e-6,
            -1.2345678901234567e-300,
            -f64::MIN_POSITIVE,
            -2.2250738585072009e-308,
        ] {
            let text = float(f);
            assert_eq!(text.parse::<f64>().unwrap(), f, "{text}");
        }
    }
}

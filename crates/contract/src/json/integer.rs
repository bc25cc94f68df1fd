//! Integer formatting: decimal digits two at a time, into a stack buffer (no `core::fmt`).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_match_std_at_the_edges() {
        let mut buf = IntBuf::default();
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            101,
            999,
            1000,
            u64::MAX / 10,
            u64::MAX,
        ] {
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
}

//! GHASH on x86_64 with the carry-less multiply instruction (PCLMULQDQ), eight blocks per
//! reduction; sixteen, four to an instruction, where the CPU multiplies 512-bit registers
//! (VPCLMULQDQ with AVX-512).
//!
//! The `ghash` crate already uses PCLMULQDQ, but one block at a time: a multiply and a full
//! reduction per 16 bytes, each depending on the last. Here `Y` advances eight blocks at once,
//! `Y' = (Y ^ X1)·H^8 ^ X2·H^7 ^ … ^ X8·H`: the eight products are independent, summed
//! unreduced (Karatsuba, three multiplies each) and reduced once.
//!
//! The arithmetic is POLYVAL's (RFC 8452), as in the `polyval` crate under `ghash`: a block is
//! byte-reversed into POLYVAL's order, the key is `mulX_POLYVAL(reverse(H))`, and the product
//! `a·b·x^-128` is reduced with shifts. Because that reduction is linear, reducing a sum of
//! products equals summing the reduced products, which is what makes the aggregation exact.
//!
//! Every function that touches the instructions is `#[target_feature]`; [`Clmul::new`] returns
//! `None` unless the CPU has them, so holding a `Clmul` is the proof each `unsafe` call relies on,
//! and its `wide` flag is set only when the 512-bit instructions were detected too.

use core::arch::x86_64::{
    __m128i, __m512i, _mm512_broadcast_i32x4, _mm512_clmulepi64_epi128, _mm512_extracti32x4_epi32,
    _mm512_loadu_si512, _mm512_set_epi64, _mm512_setzero_si512, _mm512_shuffle_epi8,
    _mm512_xor_si512, _mm512_zextsi128_si512, _mm_clmulepi64_si128, _mm_cvtsi128_si64,
    _mm_loadu_si128, _mm_set_epi64x, _mm_set_epi8, _mm_setzero_si128, _mm_shuffle_epi32,
    _mm_shuffle_epi8, _mm_slli_epi64, _mm_srli_epi64, _mm_unpackhi_epi64, _mm_unpacklo_epi64,
    _mm_xor_si128,
};

use zeroize::Zeroize as _;

const BLOCK: usize = 16;
/// Blocks hashed per reduction.
const WIDE: usize = 8;
/// Blocks hashed per reduction with 512-bit registers: four registers of four.
const WIDER: usize = 16;

/// GHASH state: the POLYVAL-order powers `H^1..H^16` (`H^1..H^8` unless `wide`) and the
/// running `Y`.
pub(crate) struct Clmul {
    /// `powers[i]` is `H^(i+1)`, POLYVAL order, as a little-endian `u128`.
    powers: [u128; WIDER],
    y: u128,
    /// The CPU has VPCLMULQDQ and AVX-512 (F and BW): sixteen blocks per reduction.
    wide: bool,
}

impl Clmul {
    /// The hash under `h` (`E_K(0)`, as GCM defines it), or `None` when the CPU lacks PCLMULQDQ,
    /// SSE2 or SSSE3.
    pub(crate) fn new(h: &[u8; BLOCK]) -> Option<Self> {
        let wide = std::is_x86_feature_detected!("vpclmulqdq")
            && std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw");
        Self::with_width(h, wide)
    }

    /// The eight-block version whatever the CPU, to test it where the wide one would be used.
    #[cfg(test)]
    pub(crate) fn narrow(h: &[u8; BLOCK]) -> Option<Self> {
        Self::with_width(h, false)
    }

    /// Whether the sixteen-block version runs.
    #[cfg(test)]
    pub(crate) fn is_wide(&self) -> bool {
        self.wide
    }

    fn with_width(h: &[u8; BLOCK], wide: bool) -> Option<Self> {
        if !(std::is_x86_feature_detected!("pclmulqdq")
            && std::is_x86_feature_detected!("sse2")
            && std::is_x86_feature_detected!("ssse3"))
        {
            return None;
        }
        // ghash: reverse(H) read little-endian is H read big-endian; then mulX_POLYVAL.
        let h = mul_x(u128::from_be_bytes(*h));
        // `H^9..H^16` only for the sixteen-block version.
        let mut powers = [0u128; WIDER];
        powers[0] = h;
        for i in 1..if wide { WIDER } else { WIDE } {
            // SAFETY: the three CPU features were detected just above.
            powers[i] = unsafe { mul(powers[i - 1], h) };
        }
        Some(Self { powers, y: 0, wide })
    }

    /// Hashes `blocks`, whose length must be a multiple of 16 (checked: a partial block would
    /// otherwise be silently dropped).
    pub(crate) fn update(&mut self, mut blocks: &[u8]) {
        assert_eq!(blocks.len() % BLOCK, 0, "GHASH takes whole blocks");
        if self.wide {
            let whole = blocks.len() / (WIDER * BLOCK) * (WIDER * BLOCK);
            // SAFETY: `wide` is set only when `new` detected the 512-bit features as well.
            self.y = unsafe { update_wide(&self.powers, self.y, &blocks[..whole]) };
            blocks = &blocks[whole..];
        }
        let powers: &[u128; WIDE] = self.powers[..WIDE].try_into().expect("eight of sixteen");
        // SAFETY: a `Clmul` exists only if `new` detected the CPU features.
        self.y = unsafe { update(powers, self.y, blocks) };
    }

    /// The GHASH output, in GCM's byte order.
    pub(crate) fn finalize(self) -> [u8; BLOCK] {
        // POLYVAL's little-endian output, reversed.
        self.y.to_be_bytes()
    }
}

impl Drop for Clmul {
    fn drop(&mut self) {
        self.powers.zeroize();
        self.y.zeroize();
    }
}

/// `mulX_POLYVAL` (RFC 8452 Appendix A): multiplies by `x` in POLYVAL's field.
fn mul_x(v: u128) -> u128 {
    let high = v >> 127;
    (v << 1) ^ high ^ (high << 127) ^ (high << 126) ^ (high << 121)
}

#[target_feature(enable = "pclmulqdq,sse2,ssse3")]
fn to_m128(v: u128) -> __m128i {
    _mm_set_epi64x((v >> 64) as i64, v as i64)
}

#[target_feature(enable = "pclmulqdq,sse2,ssse3")]
fn from_m128(v: __m128i) -> u128 {
    let low = _mm_cvtsi128_si64(v) as u64;
    let high = _mm_cvtsi128_si64(_mm_unpackhi_epi64(v, v)) as u64;
    (u128::from(high) << 64) | u128::from(low)
}

/// One POLYVAL product `a·b·x^-128`, for the key powers.
#[target_feature(enable = "pclmulqdq,sse2,ssse3")]
fn mul(a: u128, b: u128) -> u128 {
    let mut sum = Product::zero();
    sum.add(to_m128(a), to_m128(b));
    from_m128(sum.reduce())
}

/// `Y` after hashing `blocks` (a whole number of blocks), POLYVAL order.
#[target_feature(enable = "pclmulqdq,sse2,ssse3")]
fn update(powers: &[u128; WIDE], y: u128, blocks: &[u8]) -> u128 {
    // Byte `i` of the result is byte `15 - i` of the block: GCM's order into POLYVAL's.
    let reverse = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let load = |block: &[u8; BLOCK]| -> __m128i {
        // SAFETY: `block` is 16 readable bytes by its type; the load is unaligned.
        let raw = unsafe { _mm_loadu_si128(block.as_ptr().cast()) };
        _mm_shuffle_epi8(raw, reverse)
    };
    let h: [__m128i; WIDE] = core::array::from_fn(|i| to_m128(powers[i]));
    let mut y = to_m128(y);

    // `Clmul::update` checked that nothing is left over.
    let (blocks, _) = blocks.as_chunks::<BLOCK>();
    let mut wide = blocks.chunks_exact(WIDE);
    for group in &mut wide {
        let mut sum = Product::zero();
        // The first block carries `Y` and meets the highest power.
        sum.add(_mm_xor_si128(y, load(&group[0])), h[WIDE - 1]);
        for (i, block) in group.iter().enumerate().skip(1) {
            sum.add(load(block), h[WIDE - 1 - i]);
        }
        y = sum.reduce();
    }
    for block in wide.remainder() {
        let mut sum = Product::zero();
        sum.add(_mm_xor_si128(y, load(block)), h[0]);
        y = sum.reduce();
    }
    from_m128(y)
}

/// `Y` after hashing `blocks` (a whole number of sixteen-block groups), POLYVAL order: each
/// group as `Y' = (Y ^ X1)·H^16 ^ X2·H^15 ^ … ^ X16·H`, the products four to a register.
#[target_feature(enable = "vpclmulqdq,avx512f,avx512bw,pclmulqdq,sse2,ssse3")]
fn update_wide(powers: &[u128; WIDER], y: u128, blocks: &[u8]) -> u128 {
    debug_assert_eq!(blocks.len() % (WIDER * BLOCK), 0);
    let reverse = _mm512_broadcast_i32x4(_mm_set_epi8(
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    ));
    // Register `r` meets blocks `4r + 1 ..= 4r + 4` of a group, lane `j` block `4r + j + 1`,
    // whose power is `H^(16 - 4r - j)`.
    let lane = |power: usize| {
        let p = powers[power - 1];
        ((p >> 64) as i64, p as i64)
    };
    let h: [__m512i; 4] = core::array::from_fn(|r| {
        let [(h0, l0), (h1, l1), (h2, l2), (h3, l3)] =
            core::array::from_fn(|j| lane(WIDER - 4 * r - j));
        // `_mm512_set_epi64` takes the highest word first: lane 3's, then lane 2's, ...
        _mm512_set_epi64(h3, l3, h2, l2, h1, l1, h0, l0)
    });
    let mut y = to_m128(y);
    for group in blocks.chunks_exact(WIDER * BLOCK) {
        let (mut low, mut high, mut middle) = (
            _mm512_setzero_si512(),
            _mm512_setzero_si512(),
            _mm512_setzero_si512(),
        );
        for (r, power) in h.iter().enumerate() {
            let at = group[r * 4 * BLOCK..].as_ptr().cast::<__m512i>();
            // SAFETY: 64 readable bytes of the 256-byte `group`; the load is unaligned.
            let mut x = _mm512_shuffle_epi8(unsafe { _mm512_loadu_si512(at) }, reverse);
            if r == 0 {
                // `Y` joins the group's first block (lane 0).
                x = _mm512_xor_si512(x, _mm512_zextsi128_si512(y));
            }
            // Schoolbook halves: the cross products sum to the middle term.
            low = _mm512_xor_si512(low, _mm512_clmulepi64_epi128::<0x00>(x, *power));
            high = _mm512_xor_si512(high, _mm512_clmulepi64_epi128::<0x11>(x, *power));
            middle = _mm512_xor_si512(middle, _mm512_clmulepi64_epi128::<0x01>(x, *power));
            middle = _mm512_xor_si512(middle, _mm512_clmulepi64_epi128::<0x10>(x, *power));
        }
        let (low, high, middle) = (fold(low), fold(high), fold(middle));
        // `Product` keeps Karatsuba's middle, `(a0^a1)·(b0^b1)`: the cross products plus both
        // halves.
        y = Product {
            low,
            high,
            middle: _mm_xor_si128(middle, _mm_xor_si128(low, high)),
        }
        .reduce();
    }
    from_m128(y)
}

/// The XOR of a register's four lanes.
#[target_feature(enable = "avx512f,sse2")]
fn fold(v: __m512i) -> __m128i {
    _mm_xor_si128(
        _mm_xor_si128(
            _mm512_extracti32x4_epi32::<0>(v),
            _mm512_extracti32x4_epi32::<1>(v),
        ),
        _mm_xor_si128(
            _mm512_extracti32x4_epi32::<2>(v),
            _mm512_extracti32x4_epi32::<3>(v),
        ),
    )
}

/// A sum of unreduced 256-bit products, kept as Karatsuba's three parts.
struct Product {
    low: __m128i,
    high: __m128i,
    middle: __m128i,
}

impl Product {
    #[target_feature(enable = "pclmulqdq,sse2,ssse3")]
    fn zero() -> Self {
        let zero = _mm_setzero_si128();
        Self {
            low: zero,
            high: zero,
            middle: zero,
        }
    }

    /// Adds `a·b`, unreduced: `low = a0·b0`, `high = a1·b1`, `middle = (a0^a1)·(b0^b1)`.
    #[target_feature(enable = "pclmulqdq,sse2,ssse3")]
    fn add(&mut self, a: __m128i, b: __m128i) {
        let a_fold = _mm_xor_si128(a, _mm_shuffle_epi32(a, 0x0E));
        let b_fold = _mm_xor_si128(b, _mm_shuffle_epi32(b, 0x0E));
        self.low = _mm_xor_si128(self.low, _mm_clmulepi64_si128(a, b, 0x00));
        self.high = _mm_xor_si128(self.high, _mm_clmulepi64_si128(a, b, 0x11));
        self.middle = _mm_xor_si128(self.middle, _mm_clmulepi64_si128(a_fold, b_fold, 0x00));
    }

    /// The sum times `x^-128`, reduced modulo POLYVAL's polynomial (the `polyval` crate's
    /// shift-and-XOR reduction).
    #[target_feature(enable = "pclmulqdq,sse2,ssse3")]
    fn reduce(self) -> __m128i {
        let (t0, t1) = (self.low, self.high);
        let t2 = _mm_xor_si128(self.middle, _mm_xor_si128(t0, t1));
        // The 256-bit product as four 64-bit words v0 (lowest) .. v3, each in a low lane.
        let v0 = t0;
        let v1 = _mm_xor_si128(_mm_shuffle_epi32(t0, 0x0E), t2);
        let v2 = _mm_xor_si128(t1, _mm_shuffle_epi32(t2, 0x0E));
        let v3 = _mm_shuffle_epi32(t1, 0x0E);

        let v2 = xor(&[
            v2,
            v0,
            _mm_srli_epi64(v0, 1),
            _mm_srli_epi64(v0, 2),
            _mm_srli_epi64(v0, 7),
        ]);
        let v1 = xor(&[
            v1,
            _mm_slli_epi64(v0, 63),
            _mm_slli_epi64(v0, 62),
            _mm_slli_epi64(v0, 57),
        ]);
        let v3 = xor(&[
            v3,
            v1,
            _mm_srli_epi64(v1, 1),
            _mm_srli_epi64(v1, 2),
            _mm_srli_epi64(v1, 7),
        ]);
        let v2 = xor(&[
            v2,
            _mm_slli_epi64(v1, 63),
            _mm_slli_epi64(v1, 62),
            _mm_slli_epi64(v1, 57),
        ]);
        _mm_unpacklo_epi64(v2, v3)
    }
}

#[target_feature(enable = "pclmulqdq,sse2,ssse3")]
fn xor(values: &[__m128i]) -> __m128i {
    values[1..]
        .iter()
        .fold(values[0], |sum, &v| _mm_xor_si128(sum, v))
}

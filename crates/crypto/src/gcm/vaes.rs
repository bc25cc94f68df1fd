//! AES-256 in GCM's counter mode on x86_64 with the vector AES instructions (VAES on 512-bit
//! registers): sixteen blocks per step, four to an instruction.
//!
//! The `aes` crate encrypts eight blocks at a time with AES-NI, one block to an instruction;
//! on a CPU with VAES and AVX-512 the same rounds cover four blocks each. The keystream is GCM's:
//! counter blocks `nonce || be32(n)` with `n` advancing by one per block and wrapping at 2^32
//! (`inc32`), exactly as `ctr::Ctr32BE` counts; the tests compare the two for random keys,
//! counters (wrap included), lengths and splits.
//!
//! Every function that touches the instructions is `#[target_feature]`; [`VaesCtr::new`]
//! returns `None` unless the CPU has them, so holding a `VaesCtr` is the proof each `unsafe` call
//! relies on.

use core::arch::x86_64::{
    __m128i, __m512i, _mm512_add_epi32, _mm512_aesenc_epi128, _mm512_aesenclast_epi128,
    _mm512_broadcast_i32x4, _mm512_loadu_si512, _mm512_mask_storeu_epi8, _mm512_maskz_loadu_epi8,
    _mm512_set_epi32, _mm512_shuffle_epi8, _mm512_storeu_si512, _mm512_xor_si512,
    _mm_aeskeygenassist_si128, _mm_loadu_si128, _mm_set_epi8, _mm_shuffle_epi32, _mm_shuffle_epi8,
    _mm_slli_si128, _mm_storeu_si128, _mm_xor_si128,
};

use zeroize::Zeroize as _;

const BLOCK: usize = 16;
/// AES-256's rounds; the schedule holds one key more.
const ROUNDS: usize = 14;
/// Blocks per register.
const LANES: usize = 4;
/// Registers per step: the rounds of four independent registers overlap in the pipeline.
const REGISTERS: usize = 4;
const STEP: usize = LANES * REGISTERS * BLOCK;

/// An AES-256 keystream in GCM's counter mode, applied by XOR.
pub(crate) struct VaesCtr {
    round_keys: [[u8; BLOCK]; ROUNDS + 1],
    /// The first 12 bytes of every counter block.
    nonce: [u8; 12],
    /// The counter of the next block to encrypt.
    counter: u32,
    /// The keystream of the last block begun; its first `used` bytes are spent (16: none left).
    keystream: [u8; BLOCK],
    used: usize,
}

impl VaesCtr {
    /// The keystream under `key` from counter block `start` (GCM's `J0`, or any block), or
    /// `None` when the CPU lacks VAES, AVX-512 (F and BW) or AES-NI.
    pub(crate) fn new(key: &[u8; 32], start: &[u8; BLOCK]) -> Option<Self> {
        if !(std::is_x86_feature_detected!("vaes")
            && std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("aes")
            && std::is_x86_feature_detected!("sse2")
            && std::is_x86_feature_detected!("ssse3"))
        {
            return None;
        }
        let mut nonce = [0u8; 12];
        nonce.copy_from_slice(&start[..12]);
        let counter = u32::from_be_bytes([start[12], start[13], start[14], start[15]]);
        Some(Self {
            // SAFETY: AES-NI and SSE2 were detected just above.
            round_keys: unsafe { expand_key(key) },
            nonce,
            counter,
            keystream: [0; BLOCK],
            used: BLOCK,
        })
    }

    /// XORs the next `data.len()` bytes of keystream into `data`.
    pub(crate) fn apply_keystream(&mut self, mut data: &mut [u8]) {
        if self.used < BLOCK {
            let take = (BLOCK - self.used).min(data.len());
            let (head, rest) = data.split_at_mut(take);
            for (byte, key) in head.iter_mut().zip(&self.keystream[self.used..]) {
                *byte ^= key;
            }
            self.used += take;
            data = rest;
        }
        let whole = data.len() / BLOCK * BLOCK;
        let (blocks, rest) = data.split_at_mut(whole);
        if !blocks.is_empty() {
            // SAFETY: a `VaesCtr` exists only if `new` detected the CPU features.
            unsafe { xor_keystream(&self.round_keys, &self.nonce, self.counter, blocks) };
            // `inc32`: the counter wraps within its 32 bits.
            self.counter = self.counter.wrapping_add((whole / BLOCK) as u32);
        }
        if !rest.is_empty() {
            self.keystream = [0; BLOCK];
            // SAFETY: as above.
            unsafe {
                xor_keystream(
                    &self.round_keys,
                    &self.nonce,
                    self.counter,
                    &mut self.keystream,
                )
            };
            self.counter = self.counter.wrapping_add(1);
            for (byte, key) in rest.iter_mut().zip(&self.keystream) {
                *byte ^= key;
            }
            self.used = rest.len();
        }
    }
}

impl Drop for VaesCtr {
    fn drop(&mut self) {
        self.round_keys.zeroize();
        self.keystream.zeroize();
    }
}

/// AES-256's key schedule (FIPS 197 §5.2) by `AESKEYGENASSIST`, as in Intel's AES-NI white
/// paper.
#[target_feature(enable = "aes,sse2")]
fn expand_key(key: &[u8; 32]) -> [[u8; BLOCK]; ROUNDS + 1] {
    /// `k` with each of its words XORed with all the words before it, then `t` added.
    #[target_feature(enable = "aes,sse2")]
    fn mix(k: __m128i, t: __m128i) -> __m128i {
        let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        let k = _mm_xor_si128(k, _mm_slli_si128::<4>(k));
        _mm_xor_si128(k, t)
    }
    let mut keys = [[0u8; BLOCK]; ROUNDS + 1];
    let store = |slot: &mut [u8; BLOCK], k: __m128i| {
        // SAFETY: `slot` is 16 writable bytes by its type; the store is unaligned.
        unsafe { _mm_storeu_si128(slot.as_mut_ptr().cast(), k) }
    };
    // SAFETY: both halves are 16 readable bytes of `key`; the loads are unaligned.
    let mut even = unsafe { _mm_loadu_si128(key.as_ptr().cast()) };
    let mut odd = unsafe { _mm_loadu_si128(key[BLOCK..].as_ptr().cast()) };
    store(&mut keys[0], even);
    store(&mut keys[1], odd);
    // Each round makes the next even key from the odd one and, but for the last, the next odd
    // key from the new even one.
    macro_rules! round {
        ($i:literal, $rcon:literal) => {
            round!(even $i, $rcon);
            odd = mix(
                odd,
                _mm_shuffle_epi32::<0xAA>(_mm_aeskeygenassist_si128::<0>(even)),
            );
            store(&mut keys[2 * $i + 1], odd);
        };
        (even $i:literal, $rcon:literal) => {
            even = mix(
                even,
                _mm_shuffle_epi32::<0xFF>(_mm_aeskeygenassist_si128::<$rcon>(odd)),
            );
            store(&mut keys[2 * $i], even);
        };
    }
    round!(1, 0x01);
    round!(2, 0x02);
    round!(3, 0x04);
    round!(4, 0x08);
    round!(5, 0x10);
    round!(6, 0x20);
    round!(even 7, 0x40);
    keys
}

/// XORs the keystream from block `counter` on into `blocks` (a whole number of blocks).
#[target_feature(enable = "vaes,avx512f,avx512bw,aes,sse2,ssse3")]
fn xor_keystream(
    round_keys: &[[u8; BLOCK]; ROUNDS + 1],
    nonce: &[u8; 12],
    counter: u32,
    blocks: &mut [u8],
) {
    debug_assert_eq!(blocks.len() % BLOCK, 0);
    let keys: [__m512i; ROUNDS + 1] = core::array::from_fn(|i| {
        // SAFETY: 16 readable bytes by the array's type; the load is unaligned.
        _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(round_keys[i].as_ptr().cast()) })
    });
    // Counter blocks are kept byte-reversed within each 128-bit lane, so that the counter is the
    // lane's lowest 32-bit word, which a 32-bit add advances (wrapping, as `inc32` does); one
    // byte shuffle per register turns them back into blocks.
    let reverse = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let mut first = [0u8; BLOCK];
    first[..12].copy_from_slice(nonce);
    first[12..].copy_from_slice(&counter.to_be_bytes());
    // SAFETY: 16 readable bytes of `first`; the load is unaligned.
    let first = _mm_shuffle_epi8(unsafe { _mm_loadu_si128(first.as_ptr().cast()) }, reverse);
    let reverse = _mm512_broadcast_i32x4(reverse);
    let mut counters = _mm512_add_epi32(
        _mm512_broadcast_i32x4(first),
        _mm512_set_epi32(0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0),
    );
    let four = _mm512_set_epi32(0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4);
    let mut next = || {
        let block = _mm512_shuffle_epi8(counters, reverse);
        counters = _mm512_add_epi32(counters, four);
        block
    };
    let mut steps = blocks.chunks_exact_mut(STEP);
    for step in &mut steps {
        let keystreams = encrypt::<REGISTERS>(&keys, core::array::from_fn(|_| next()));
        for (i, keystream) in keystreams.into_iter().enumerate() {
            let at = step[i * LANES * BLOCK..].as_mut_ptr().cast::<__m512i>();
            // SAFETY: `at` is 64 bytes inside the 256-byte `step`; the accesses are unaligned.
            unsafe { _mm512_storeu_si512(at, _mm512_xor_si512(_mm512_loadu_si512(at), keystream)) };
        }
    }
    for chunk in steps.into_remainder().chunks_mut(LANES * BLOCK) {
        let [keystream] = encrypt(&keys, [next()]);
        // The register's first `chunk.len()` bytes (1 to 4 whole blocks); the mask keeps the
        // load and the store inside `chunk`.
        let mask = u64::MAX >> (64 - chunk.len());
        let at = chunk.as_mut_ptr().cast::<i8>();
        // SAFETY: the masked accesses touch only `chunk`'s bytes (masked-off lanes fault not).
        unsafe {
            let data = _mm512_maskz_loadu_epi8(mask, at);
            _mm512_mask_storeu_epi8(at, mask, _mm512_xor_si512(data, keystream));
        }
    }
}

/// AES-256 of `N` registers of four blocks each, round by round across the registers (their
/// rounds are independent, so they overlap in the pipeline).
#[inline]
#[target_feature(enable = "vaes,avx512f")]
fn encrypt<const N: usize>(keys: &[__m512i; ROUNDS + 1], mut states: [__m512i; N]) -> [__m512i; N] {
    for state in &mut states {
        *state = _mm512_xor_si512(*state, keys[0]);
    }
    for key in &keys[1..ROUNDS] {
        for state in &mut states {
            *state = _mm512_aesenc_epi128(*state, *key);
        }
    }
    for state in &mut states {
        *state = _mm512_aesenclast_epi128(*state, keys[ROUNDS]);
    }
    states
}

#[cfg(test)]
mod tests {
    use aes::cipher::{KeyIvInit as _, StreamCipher as _};
    use proptest::prelude::*;

    use super::*;

    type Reference = ctr::Ctr32BE<aes::Aes256>;

    /// `data` through both keystreams in the pieces `cuts` mark: the VAES one's output, or
    /// `None` on a CPU without the instructions.
    fn both(
        key: &[u8; 32],
        start: &[u8; BLOCK],
        data: &[u8],
        cuts: &[usize],
    ) -> Option<(Vec<u8>, Vec<u8>)> {
        let mut fast = VaesCtr::new(key, start)?;
        let mut reference = Reference::new(key.into(), start.into());
        let (mut ours, mut theirs) = (data.to_vec(), data.to_vec());
        reference.apply_keystream(&mut theirs);
        let mut at = 0;
        for &cut in cuts.iter().chain([&data.len()]) {
            let end = cut.clamp(at, data.len());
            fast.apply_keystream(&mut ours[at..end]);
            at = end;
        }
        Some((ours, theirs))
    }

    fn has_vaes() -> bool {
        let present = VaesCtr::new(&[0; 32], &[0; BLOCK]).is_some();
        if !present {
            eprintln!(
                "this CPU lacks VAES or AVX-512: the `ctr` crate's keystream is used instead"
            );
        }
        present
    }

    #[test]
    fn exists_exactly_when_the_cpu_has_the_instructions() {
        let expected = std::is_x86_feature_detected!("vaes")
            && std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("aes");
        assert_eq!(has_vaes(), expected);
    }

    /// FIPS 197 Appendix C.3: AES-256 of one block, here as the keystream of counter block
    /// `00112233…ff` XORed into zeros.
    #[test]
    fn fips_197_aes_256_block() {
        let key: [u8; 32] = core::array::from_fn(|i| i as u8);
        let block: [u8; BLOCK] = core::array::from_fn(|i| (i as u8) * 0x11);
        let Some(mut ctr) = VaesCtr::new(&key, &block) else {
            assert!(!has_vaes());
            return;
        };
        let mut out = [0u8; BLOCK];
        ctr.apply_keystream(&mut out);
        assert_eq!(hex::encode(out), "8ea2b7ca516745bfeafc49904b496089");
    }

    #[test]
    fn every_length_and_cut_to_600_bytes_equals_the_ctr_crate() {
        let key: [u8; 32] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        let start: [u8; BLOCK] = core::array::from_fn(|i| (i * 13 + 1) as u8);
        let data: Vec<u8> = (0..600u32).map(|i| (i * 31 + 5) as u8).collect();
        for len in 0..=data.len() {
            for cut in [0, 1, 15, 16, 17, 63, 64, 255, 256, 257, len / 2] {
                let Some((ours, theirs)) = both(&key, &start, &data[..len], &[cut]) else {
                    assert!(!has_vaes());
                    return;
                };
                assert_eq!(ours, theirs, "length {len}, cut at {cut}");
            }
        }
    }

    #[test]
    fn the_counter_wraps_within_its_32_bits() {
        let key = [9u8; 32];
        let mut start = [0xEEu8; BLOCK];
        start[12..].copy_from_slice(&(u32::MAX - 5).to_be_bytes());
        let data = vec![0x5Au8; 40 * BLOCK + 3];
        let Some((ours, theirs)) = both(&key, &start, &data, &[7 * BLOCK + 2, 20 * BLOCK]) else {
            assert!(!has_vaes());
            return;
        };
        assert_eq!(ours, theirs);
    }

    proptest! {
        #[test]
        fn equals_the_ctr_crate_for_any_key_counter_length_and_split(
            key in any::<[u8; 32]>(),
            start in any::<[u8; BLOCK]>(),
            data in proptest::collection::vec(any::<u8>(), 0..3000),
            mut cuts in proptest::collection::vec(0usize..3000, 0..8),
        ) {
            cuts.sort_unstable();
            if let Some((ours, theirs)) = both(&key, &start, &data, &cuts) {
                prop_assert_eq!(ours, theirs);
            }
        }
    }
}

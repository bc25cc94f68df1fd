//! GHASH for [`Gcm`](super::Gcm): the PCLMULQDQ eight-block version where the CPU has it, the
//! `ghash` crate everywhere else.
//!
//! The choice is made once per seal, at construction; both produce the same bytes (the tests
//! below compare them on a known answer, every split of short inputs and random keys, lengths
//! and splits).

use ghash::universal_hash::{KeyInit as _, UniversalHash as _};
use ghash::GHash;

#[cfg(target_arch = "x86_64")]
use super::clmul::Clmul;

const BLOCK: usize = 16;

/// A GHASH in progress, fed whole blocks.
pub(crate) enum Ghash {
    #[cfg(target_arch = "x86_64")]
    Clmul(Box<Clmul>),
    Portable(GHash),
}

impl Ghash {
    /// The fastest GHASH this CPU runs, under hash key `h`.
    pub(crate) fn new(h: &[u8; BLOCK]) -> Self {
        #[cfg(target_arch = "x86_64")]
        if let Some(clmul) = Clmul::new(h) {
            return Self::Clmul(Box::new(clmul));
        }
        Self::portable(h)
    }

    /// The `ghash` crate's GHASH, whatever the CPU: the reference the fast one is tested and
    /// measured against.
    pub(crate) fn portable(h: &[u8; BLOCK]) -> Self {
        Self::Portable(GHash::new(h.into()))
    }

    /// Hashes `blocks`, a whole number of 16-byte blocks.
    pub(crate) fn update(&mut self, blocks: &[u8]) {
        debug_assert_eq!(blocks.len() % BLOCK, 0);
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::Clmul(clmul) => clmul.update(blocks),
            // `update_padded` on whole blocks pads nothing and copies nothing.
            Self::Portable(ghash) => ghash.update_padded(blocks),
        }
    }

    /// The GHASH of everything hashed.
    pub(crate) fn finalize(self) -> [u8; BLOCK] {
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::Clmul(clmul) => clmul.finalize(),
            Self::Portable(ghash) => ghash.finalize().into(),
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// GHASH of `data` fed in the pieces that `cuts` (block indices) mark.
    fn hash(mut ghash: Ghash, data: &[u8], cuts: &[usize]) -> [u8; BLOCK] {
        let mut start = 0;
        for &cut in cuts.iter().chain([&(data.len() / BLOCK)]) {
            let end = (cut * BLOCK).clamp(start, data.len());
            ghash.update(&data[start..end]);
            start = end;
        }
        ghash.finalize()
    }

    fn fast(h: &[u8; BLOCK]) -> Ghash {
        let ghash = Ghash::new(h);
        assert!(
            matches!(ghash, Ghash::Clmul(_)),
            "this CPU has PCLMULQDQ, so the test exercises it"
        );
        ghash
    }

    fn data(blocks: usize, seed: u8) -> Vec<u8> {
        (0..blocks * BLOCK)
            .map(|i| (i as u8).wrapping_mul(167) ^ seed)
            .collect()
    }

    #[test]
    fn the_sixteen_block_version_runs_exactly_where_the_cpu_has_it() {
        let Ghash::Clmul(clmul) = fast(&[1; BLOCK]) else {
            unreachable!("`fast` checked it")
        };
        let expected = std::is_x86_feature_detected!("vpclmulqdq")
            && std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw");
        assert_eq!(clmul.is_wide(), expected);
        if !expected {
            eprintln!("this CPU lacks VPCLMULQDQ or AVX-512: only the eight-block GHASH ran");
        }
    }

    /// GCM's own GHASH known answer (McGrew & Viega test case 2: H = E_0(0), C = E_0(J0 + 1)).
    #[test]
    fn clmul_reproduces_the_gcm_specification_ghash() {
        let h: [u8; BLOCK] = hex::decode("66e94bd4ef8a2c3b884cfa59ca342b2e")
            .unwrap()
            .try_into()
            .unwrap();
        let input = hex::decode(
            "0388dace60b6a392f328c2b971b2fe78\
             00000000000000000000000000000080",
        )
        .unwrap();
        let expected = hex::decode("f38cbb1ad69223dcc3457ae5b6b0f885").unwrap();
        assert_eq!(hash(fast(&h), &input, &[]).as_slice(), expected.as_slice());
        assert_eq!(
            hash(Ghash::portable(&h), &input, &[]).as_slice(),
            expected.as_slice()
        );
    }

    /// Every split into two or three pieces of 0..=40 blocks: each path through the sixteen-
    /// and eight-block groups and the single-block tail, with `Y` carried between calls, on the
    /// widest version this CPU runs and on the eight-block one.
    #[test]
    fn clmul_equals_ghash_crate_for_every_split_of_short_inputs() {
        let h = [0x5a; BLOCK];
        let narrow = |h: &[u8; BLOCK]| Ghash::Clmul(Box::new(Clmul::narrow(h).expect("PCLMULQDQ")));
        for blocks in 0..=40 {
            let input = data(blocks, blocks as u8);
            let expected = hash(Ghash::portable(&h), &input, &[]);
            for a in 0..=blocks {
                for b in a..=blocks {
                    assert_eq!(
                        hash(fast(&h), &input, &[a, b]),
                        expected,
                        "{blocks}: {a},{b}"
                    );
                    assert_eq!(
                        hash(narrow(&h), &input, &[a, b]),
                        expected,
                        "eight-block version, {blocks}: {a},{b}"
                    );
                }
            }
        }
    }

    proptest! {
        #[test]
        fn clmul_equals_ghash_crate_for_random_keys_lengths_and_splits(
            h in any::<[u8; BLOCK]>(),
            input in proptest::collection::vec(any::<u8>(), 0..4096),
            mut cuts in proptest::collection::vec(0usize..256, 0..12),
        ) {
            let whole = input.len() / BLOCK * BLOCK;
            let input = &input[..whole];
            cuts.sort_unstable();
            prop_assert_eq!(hash(fast(&h), input, &cuts), hash(Ghash::portable(&h), input, &[]));
        }
    }
}

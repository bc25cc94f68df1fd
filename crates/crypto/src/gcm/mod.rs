//! Incremental AES-256-GCM (96-bit nonce, no associated data) composed from `aes`, `ctr` and
//! `ghash`, exactly as `aes-gcm` computes it in one shot.
//!
//! `aes-gcm` 0.10 only works on a whole buffer, and no well-kept pure-Rust crate offers an
//! incremental GCM (the ones found wrap C libraries or are one-person projects),
//! so the streamed seal builds it from the same RustCrypto parts `aes-gcm` uses: the keystream
//! from `Ctr32BE` starting at `J0 = nonce || 1`, the tag `GHASH_H(C || len) ^ E_K(J0)` with
//! `H = E_K(0)`. The tests below prove it byte-equal to `aes-gcm` (NIST vectors and a property
//! test over random lengths and chunkings).
//!
//! GHASH is the costly half, so it has its own module: `hash` picks `clmul`, an eight-block
//! PCLMULQDQ GHASH, on x86_64 CPUs that have the instruction, and the `ghash` crate elsewhere.

use aes::cipher::{BlockEncrypt as _, KeyInit as _};
use aes::Aes256;
use zeroize::{Zeroize as _, Zeroizing};

pub(crate) use self::hash::Ghash;

use crate::seal::{NONCE_LEN, TAG_LEN};
use crate::secret::KEY_LEN;

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // The CPU instructions; see the module and SECURITY.md.
mod clmul;
mod hash;
mod keystream;
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)] // The CPU instructions; see the module and SECURITY.md.
mod vaes;

use self::keystream::Keystream;

const BLOCK: usize = 16;

/// The most plaintext one nonce may cover: 2^39 - 256 bits (NIST SP 800-38D), 64 GiB - 32 bytes.
/// (`aes-gcm` accepts up to 2^36 bytes; the two agree on every length up to this one.)
pub(crate) const MAX_PLAINTEXT: u64 = (1 << 36) - 32;

/// The plaintext went past [`MAX_PLAINTEXT`]; nothing of the chunk was processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooLong;

/// AES-256-GCM over data that arrives in pieces of any size.
///
/// Memory is constant: the counter state, the GHASH state and at most one partial block of
/// ciphertext waiting for GHASH.
pub(crate) struct Gcm {
    ctr: Keystream,
    ghash: Ghash,
    /// `E_K(J0)`, XORed into the final GHASH to make the tag. Wiped on drop, as is `partial`;
    /// the counter and GHASH states wipe themselves only with their `zeroize` features.
    tag_mask: Zeroizing<[u8; BLOCK]>,
    /// Ciphertext bytes not yet a whole block for GHASH; `partial_len` of them are valid.
    partial: Zeroizing<[u8; BLOCK]>,
    partial_len: usize,
    /// Plaintext (= ciphertext) bytes processed so far.
    len: u64,
}

impl Gcm {
    pub(crate) fn new(key: &[u8; KEY_LEN], nonce: &[u8; NONCE_LEN]) -> Self {
        Self::with_parts(key, nonce, Keystream::new, Ghash::new)
    }

    /// The same cipher on the `ctr` crate's keystream and the `ghash` crate's GHASH whatever the
    /// CPU, the reference for tests and measurements.
    #[cfg(test)]
    pub(crate) fn portable(key: &[u8; KEY_LEN], nonce: &[u8; NONCE_LEN]) -> Self {
        Self::with_parts(key, nonce, Keystream::portable, Ghash::portable)
    }

    fn with_parts(
        key: &[u8; KEY_LEN],
        nonce: &[u8; NONCE_LEN],
        keystream: fn(&[u8; KEY_LEN], &[u8; BLOCK]) -> Keystream,
        ghash: fn(&[u8; BLOCK]) -> Ghash,
    ) -> Self {
        let cipher = Aes256::new(key.into());
        let mut hash_key = [0u8; BLOCK];
        cipher.encrypt_block((&mut hash_key).into());
        let ghash = ghash(&hash_key);
        hash_key.zeroize();

        let mut j0 = [0u8; BLOCK];
        j0[..NONCE_LEN].copy_from_slice(nonce);
        j0[BLOCK - 1] = 1;
        let mut ctr = keystream(key, &j0);
        // The first keystream block is E_K(J0), the tag mask; data starts at counter J0 + 1.
        let mut tag_mask = Zeroizing::new([0u8; BLOCK]);
        ctr.apply_keystream(tag_mask.as_mut());
        Self {
            ctr,
            ghash,
            tag_mask,
            partial: Zeroizing::new([0; BLOCK]),
            partial_len: 0,
            len: 0,
        }
    }

    /// Plaintext (= ciphertext) bytes processed so far.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Pretends `len` bytes were processed, to test the length limit without 64 GiB of data.
    #[cfg(test)]
    pub(crate) fn skip_to(&mut self, len: u64) {
        self.len = len;
    }

    /// Encrypts `data` in place, continuing where the previous call stopped.
    pub(crate) fn encrypt(&mut self, data: &mut [u8]) -> Result<(), TooLong> {
        self.advance(data.len())?;
        self.ctr.apply_keystream(data);
        self.hash(data);
        Ok(())
    }

    /// Decrypts `data` in place, continuing where the previous call stopped. The plaintext is not
    /// authenticated until [`finish`](Self::finish)'s tag has been compared.
    pub(crate) fn decrypt(&mut self, data: &mut [u8]) -> Result<(), TooLong> {
        self.advance(data.len())?;
        self.hash(data);
        self.ctr.apply_keystream(data);
        Ok(())
    }

    /// The 16-byte tag over everything processed.
    pub(crate) fn finish(mut self) -> [u8; TAG_LEN] {
        if self.partial_len > 0 {
            // GHASH pads the last partial block with zeros; the bytes past `partial_len` are
            // leftovers of an earlier block, so clear them first.
            self.partial[self.partial_len..].fill(0);
            self.ghash.update(self.partial.as_ref());
        }
        let mut lengths = [0u8; BLOCK];
        // No associated data: the first 8 bytes (its bit length) stay zero.
        lengths[8..].copy_from_slice(&(self.len * 8).to_be_bytes());
        self.ghash.update(&lengths);
        let mut tag: [u8; TAG_LEN] = self.ghash.finalize();
        for (byte, mask) in tag.iter_mut().zip(self.tag_mask.iter()) {
            *byte ^= mask;
        }
        tag
    }

    fn advance(&mut self, n: usize) -> Result<(), TooLong> {
        let len = self
            .len
            .checked_add(n as u64)
            .filter(|&len| len <= MAX_PLAINTEXT)
            .ok_or(TooLong)?;
        self.len = len;
        Ok(())
    }

    /// Feeds ciphertext to GHASH in whole blocks, keeping a trailing partial block for later.
    fn hash(&mut self, mut ciphertext: &[u8]) {
        if self.partial_len > 0 {
            let take = (BLOCK - self.partial_len).min(ciphertext.len());
            self.partial[self.partial_len..self.partial_len + take]
                .copy_from_slice(&ciphertext[..take]);
            self.partial_len += take;
            ciphertext = &ciphertext[take..];
            if self.partial_len < BLOCK {
                return;
            }
            self.ghash.update(self.partial.as_ref());
            self.partial_len = 0;
        }
        let whole = ciphertext.len() / BLOCK * BLOCK;
        let (blocks, rest) = ciphertext.split_at(whole);
        self.ghash.update(blocks);
        self.partial[..rest.len()].copy_from_slice(rest);
        self.partial_len = rest.len();
    }
}

#[cfg(test)]
mod tests {
    use aes_gcm::{AeadInPlace as _, Aes256Gcm, KeyInit as _, Nonce};
    use proptest::prelude::*;

    use super::*;

    fn one_shot(key: &[u8; KEY_LEN], nonce: &[u8; NONCE_LEN], plaintext: &[u8]) -> Vec<u8> {
        let mut buffer = plaintext.to_vec();
        let tag = Aes256Gcm::new(key.into())
            .encrypt_in_place_detached(Nonce::from_slice(nonce), &[], &mut buffer)
            .unwrap();
        buffer.extend_from_slice(&tag);
        buffer
    }

    fn streamed(
        key: &[u8; KEY_LEN],
        nonce: &[u8; NONCE_LEN],
        plaintext: &[u8],
        cuts: &[usize],
    ) -> Vec<u8> {
        let mut gcm = Gcm::new(key, nonce);
        let mut buffer = plaintext.to_vec();
        let mut start = 0;
        for &cut in cuts.iter().chain([&plaintext.len()]) {
            let end = cut.clamp(start, plaintext.len());
            gcm.encrypt(&mut buffer[start..end]).unwrap();
            start = end;
        }
        buffer.extend_from_slice(&gcm.finish());
        buffer
    }

    fn unhex<const N: usize>(text: &str) -> [u8; N] {
        hex::decode(text).unwrap().try_into().unwrap()
    }

    /// AES-256 GCM vectors with 96-bit IVs and no AAD, from NIST's GCM specification
    /// (McGrew & Viega, test cases 13-15) and the CAVP `gcmEncryptExtIV256.rsp` file.
    #[test]
    fn nist_aes_256_vectors_are_reproduced_in_every_split() {
        let cases: [(&str, &str, &str, &str, &str); 5] = [
            (
                "0000000000000000000000000000000000000000000000000000000000000000",
                "000000000000000000000000",
                "",
                "",
                "530f8afbc74536b9a963b4f1c4cb738b",
            ),
            (
                "0000000000000000000000000000000000000000000000000000000000000000",
                "000000000000000000000000",
                "00000000000000000000000000000000",
                "cea7403d4d606b6e074ec5d3baf39d18",
                "d0d1c8a799996bf0265b98b5d48ab919",
            ),
            (
                "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
                "cafebabefacedbaddecaf888",
                "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72\
                 1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255",
                "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa\
                 8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662898015ad",
                "b094dac5d93471bdec1a502270e3cc6c",
            ),
            (
                // CAVP gcmEncryptExtIV256, [Keylen = 256] [IVlen = 96] [PTlen = 128] Count = 0.
                "31bdadd96698c204aa9ce1448ea94ae1fb4a9a0b3c9d773b51bb1822666b8f22",
                "0d18e06c7c725ac9e362e1ce",
                "2db5168e932556f8089a0622981d017d",
                "fa4362189661d163fcd6a56d8bf0405a",
                "d636ac1bbedd5cc3ee727dc2ab4a9489",
            ),
            (
                // CAVP gcmEncryptExtIV256, [PTlen = 104]: a partial last block.
                "82c4f12eeec3b2d3d157b0f992d292b237478d2cecc1d5f161389b97f999057a",
                "7b40b20f5f397177990ef2d1",
                "982a296ee1cd7086afad976945",
                "ec8e05a0471d6b43a59ca5335f",
                "113ddeafc62373cac2f5951bb9165249",
            ),
        ];
        for (key, nonce, plaintext, ciphertext, tag) in cases {
            let (key, nonce) = (unhex::<32>(key), unhex::<12>(nonce));
            let plaintext = hex::decode(plaintext).unwrap();
            let expected = [hex::decode(ciphertext).unwrap(), hex::decode(tag).unwrap()].concat();
            assert_eq!(one_shot(&key, &nonce, &plaintext), expected, "aes-gcm");
            for cut in 0..=plaintext.len() {
                assert_eq!(streamed(&key, &nonce, &plaintext, &[cut]), expected);
            }
            let bytewise: Vec<usize> = (0..plaintext.len()).collect();
            assert_eq!(streamed(&key, &nonce, &plaintext, &bytewise), expected);
        }
    }

    #[test]
    fn decrypting_in_pieces_restores_the_plaintext_and_the_same_tag() {
        let (key, nonce) = ([7u8; KEY_LEN], [9u8; NONCE_LEN]);
        let plaintext: Vec<u8> = (0..1000u32).map(|i| (i * 31) as u8).collect();
        let sealed = one_shot(&key, &nonce, &plaintext);
        let (ciphertext, tag) = sealed.split_at(plaintext.len());
        let mut buffer = ciphertext.to_vec();
        let mut gcm = Gcm::new(&key, &nonce);
        for piece in buffer.chunks_mut(37) {
            gcm.decrypt(piece).unwrap();
        }
        assert_eq!(buffer, plaintext);
        assert_eq!(gcm.finish(), tag);
    }

    #[test]
    fn plaintext_past_the_gcm_limit_is_refused() {
        let mut gcm = Gcm::new(&[1; KEY_LEN], &[2; NONCE_LEN]);
        gcm.len = MAX_PLAINTEXT - 3;
        assert_eq!(gcm.encrypt(&mut [0; 4]), Err(TooLong));
        assert_eq!(gcm.len, MAX_PLAINTEXT - 3, "a refused chunk counts nothing");
        assert_eq!(gcm.encrypt(&mut [0; 3]), Ok(()));
        assert_eq!(gcm.decrypt(&mut [0; 1]), Err(TooLong));
    }

    proptest! {
        #[test]
        fn streamed_gcm_equals_aes_gcm_for_any_length_and_chunking(
            key in any::<[u8; KEY_LEN]>(),
            nonce in any::<[u8; NONCE_LEN]>(),
            plaintext in proptest::collection::vec(any::<u8>(), 0..2048),
            mut cuts in proptest::collection::vec(0usize..2048, 0..12),
        ) {
            cuts.sort_unstable();
            prop_assert_eq!(
                streamed(&key, &nonce, &plaintext, &cuts),
                one_shot(&key, &nonce, &plaintext)
            );
        }
    }
}

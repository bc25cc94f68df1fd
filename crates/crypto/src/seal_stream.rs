//! The sealed blob of contract §2 produced piece by piece: the same base64 text as
//! [`CipherKey::seal`] in memory independent of the plaintext's length.

use std::fmt;

use crate::error::SealError;
use crate::gcm::{Gcm, TooLong, MAX_PLAINTEXT};
use crate::seal::{random_nonce, CipherKey, NONCE_LEN, TAG_LEN};

/// Plaintext encrypted per step: a multiple of the AES block (16) and of the base64 group (3), so
/// a whole step encodes without a carry, and small enough to stay in the L2 cache.
const STEP: usize = 3 * 16 * 1024;

/// A seal in progress: `base64std(nonce || ciphertext || tag)` emitted as the plaintext arrives.
///
/// Feed the plaintext with [`update`](Self::update) in pieces of any size, then call
/// [`finish`](Self::finish). The concatenation of everything both append is exactly what
/// [`CipherKey::seal_with_nonce`] returns for the whole plaintext and the same nonce, however it
/// was split: the nonce leads, the tag ends, and `=` padding appears only at the very end (the
/// 3-byte base64 grouping is carried across pieces).
///
/// Memory is one scratch buffer of at most 48 KiB (no bigger than the plaintext seen: a small
/// result never pays for zeroing the whole step) plus the cipher state, whatever the length.
/// `Debug` prints nothing of the key-derived state.
///
/// ```
/// use crypto::{CipherKey, SealStream};
///
/// let key = CipherKey::from_bytes([7; 32]);
/// let mut stream = SealStream::new(&key);
/// let mut text = Vec::new();
/// for piece in [&b"{\"pg\":"[..], b"{}", b"}"] {
///     stream.update(piece, &mut text)?;
///     // Here each piece of `text` could go to an upload and be cleared.
/// }
/// stream.finish(&mut text);
/// assert_eq!(text.len() as u64, SealStream::sealed_len(9));
/// assert_eq!(key.open_bytes(&text)?, br#"{"pg":{}}"#);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SealStream {
    gcm: Gcm,
    /// The bytes carried from the previous piece (the nonce at first, then at most two bytes of
    /// an incomplete base64 group); a piece's ciphertext is appended after them. Its capacity
    /// grows to at most one step and stays.
    scratch: Vec<u8>,
}

impl SealStream {
    /// Starts a seal under `key` with a fresh random nonce from the OS.
    ///
    /// # Panics
    ///
    /// If the OS random source fails, as [`CipherKey::seal`].
    pub fn new(key: &CipherKey) -> Self {
        Self::with_nonce(key, random_nonce())
    }

    /// Starts a seal with a caller-chosen nonce. **For known-answer tests only**: reusing a nonce
    /// under one key breaks AES-GCM, so production code calls [`new`](Self::new).
    #[doc(hidden)]
    pub fn with_nonce(key: &CipherKey, nonce: [u8; NONCE_LEN]) -> Self {
        Self::with_gcm(Gcm::new(key.secret().expose(), &nonce), nonce)
    }

    /// The same seal on the `ghash` crate's GHASH, the reference the cost test measures against.
    #[cfg(test)]
    pub(crate) fn portable(key: &CipherKey, nonce: [u8; NONCE_LEN]) -> Self {
        Self::with_gcm(Gcm::portable(key.secret().expose(), &nonce), nonce)
    }

    fn with_gcm(gcm: Gcm, nonce: [u8; NONCE_LEN]) -> Self {
        Self {
            gcm,
            scratch: nonce.to_vec(),
        }
    }

    /// Length of the base64 text sealing `plaintext_len` bytes (what `update` and `finish` append
    /// in total), for a `Content-Length` known in advance.
    pub fn sealed_len(plaintext_len: u64) -> u64 {
        (NONCE_LEN as u64 + plaintext_len + TAG_LEN as u64).div_ceil(3) * 4
    }

    /// The most plaintext whose text [`update`](Self::update) appends within `text_room` bytes:
    /// what a producer feeds to fill a buffer of fixed size (an upload's part) exactly, in
    /// place. 0 when even the carried bytes' text would not fit (only before the first update,
    /// while the nonce is carried, for a room of less than 16 bytes).
    pub fn fits(&self, text_room: usize) -> usize {
        // `update` appends 4 bytes per whole group of 3 of the carried bytes and the plaintext.
        (text_room / 4)
            .saturating_mul(3)
            .saturating_add(2)
            .saturating_sub(self.scratch.len())
    }

    /// Seals the next piece of plaintext and appends the base64 text it completes to `out`.
    ///
    /// Appends `4 * floor((carried + plaintext.len()) / 3)` bytes; the (at most two) bytes of an
    /// incomplete group wait for the next call or for `finish`.
    ///
    /// # Errors
    ///
    /// [`SealError::TooLong`] if the plaintext so far would pass AES-GCM's limit for one nonce;
    /// nothing of `plaintext` is consumed or appended then.
    pub fn update(&mut self, plaintext: &[u8], out: &mut Vec<u8>) -> Result<(), SealError> {
        if self.gcm.len().saturating_add(plaintext.len() as u64) > MAX_PLAINTEXT {
            return Err(SealError::TooLong);
        }
        out.reserve((self.scratch.len() + plaintext.len()) / 3 * 4);
        for piece in plaintext.chunks(STEP) {
            let start = self.scratch.len();
            // Exactly: the capacity stays at the largest piece seen, one step at most.
            self.scratch.reserve_exact(piece.len());
            self.scratch.extend_from_slice(piece);
            if let Err(TooLong) = self.gcm.encrypt(&mut self.scratch[start..]) {
                self.scratch.truncate(start);
                return Err(SealError::TooLong);
            }
            let end = self.scratch.len();
            let whole = end / 3 * 3;
            encode(&self.scratch[..whole], out);
            self.scratch.copy_within(whole..end, 0);
            self.scratch.truncate(end - whole);
        }
        Ok(())
    }

    /// Completes the seal: appends the base64 text of the carried bytes and the tag, with `=`
    /// padding.
    pub fn finish(mut self, out: &mut Vec<u8>) {
        let tag = self.gcm.finish();
        self.scratch.extend_from_slice(&tag);
        encode(&self.scratch, out);
    }
}

/// Appends the padded standard base64 of `bytes` to `out`: SIMD, into `out`'s spare room
/// (no zero fill first); the same text as the `base64` crate's `STANDARD` (property-tested).
fn encode(bytes: &[u8], out: &mut Vec<u8>) {
    base64_simd::STANDARD.encode_append(bytes, out);
}

impl fmt::Debug for SealStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SealStream(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const NONCE: [u8; NONCE_LEN] = [0xA5; NONCE_LEN];

    fn key() -> CipherKey {
        CipherKey::from_bytes(std::array::from_fn(|i| 3 * i as u8 + 1))
    }

    /// Seals `plaintext` cut at `cuts` (sorted offsets, clamped to the length).
    fn streamed(plaintext: &[u8], cuts: &[usize]) -> String {
        let mut stream = SealStream::with_nonce(&key(), NONCE);
        let mut out = Vec::new();
        let mut start = 0;
        for &cut in cuts.iter().chain([&plaintext.len()]) {
            let end = cut.clamp(start, plaintext.len());
            stream.update(&plaintext[start..end], &mut out).unwrap();
            start = end;
        }
        stream.finish(&mut out);
        String::from_utf8(out).unwrap()
    }

    fn one_shot(plaintext: &[u8]) -> String {
        key().seal_with_nonce(plaintext, NONCE)
    }

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 131 + i / 7) as u8).collect()
    }

    #[test]
    fn empty_plaintext_is_nonce_and_tag() {
        assert_eq!(streamed(b"", &[]), one_shot(b""));
        let stream = SealStream::with_nonce(&key(), NONCE);
        let mut out = Vec::new();
        stream.finish(&mut out);
        assert_eq!(out, one_shot(b"").as_bytes());
        assert_eq!(out.len() as u64, SealStream::sealed_len(0));
    }

    #[test]
    fn one_byte_seals_as_one_shot() {
        assert_eq!(streamed(b"x", &[]), one_shot(b"x"));
        assert_eq!(streamed(b"x", &[0, 0, 1, 1]), one_shot(b"x"));
    }

    #[test]
    fn multiples_of_the_block_and_of_the_base64_group_seal_as_one_shot() {
        for len in [3, 6, 15, 16, 17, 32, 47, 48, 49, 96, 4095, 4096, 4097] {
            let plaintext = data(len);
            assert_eq!(streamed(&plaintext, &[]), one_shot(&plaintext), "len {len}");
            assert_eq!(
                streamed(&plaintext, &[len / 3, len / 2, 2 * len / 3]),
                one_shot(&plaintext),
                "len {len} in thirds"
            );
        }
    }

    #[test]
    fn pieces_larger_than_one_step_seal_as_one_shot() {
        let plaintext = data(3 * STEP + 5);
        assert_eq!(streamed(&plaintext, &[]), one_shot(&plaintext));
        assert_eq!(streamed(&plaintext, &[1, STEP + 2]), one_shot(&plaintext));
    }

    #[test]
    fn update_appends_only_whole_base64_groups_without_padding() {
        let mut stream = SealStream::with_nonce(&key(), NONCE);
        let mut out = Vec::new();
        stream.update(b"a", &mut out).unwrap();
        // Nonce (12) + 1 byte: four groups of three, one byte carried.
        assert_eq!(out.len(), 16);
        stream.update(b"bc", &mut out).unwrap();
        assert_eq!(out.len(), 20);
        assert!(!out.contains(&b'='));
        stream.finish(&mut out);
        assert_eq!(out, one_shot(b"abc").as_bytes());
    }

    #[test]
    fn streamed_output_opens_with_the_one_shot_open() {
        let key = key();
        let plaintext = data(100_000);
        let mut stream = SealStream::new(&key);
        let mut out = Vec::new();
        for piece in plaintext.chunks(777) {
            stream.update(piece, &mut out).unwrap();
        }
        stream.finish(&mut out);
        assert_eq!(key.open_bytes(&out).unwrap(), plaintext);
        assert_eq!(out.len() as u64, SealStream::sealed_len(100_000));
    }

    #[test]
    fn two_streams_use_different_nonces() {
        let (mut first, mut second) = (Vec::new(), Vec::new());
        SealStream::new(&key()).finish(&mut first);
        SealStream::new(&key()).finish(&mut second);
        assert_ne!(first, second);
    }

    #[test]
    fn update_appends_to_what_the_buffer_already_holds() {
        let mut out = b"prefix:".to_vec();
        let mut stream = SealStream::with_nonce(&key(), NONCE);
        stream.update(b"hello", &mut out).unwrap();
        stream.finish(&mut out);
        assert_eq!(out, format!("prefix:{}", one_shot(b"hello")).as_bytes());
    }

    #[test]
    fn plaintext_past_the_gcm_limit_is_refused_and_not_consumed() {
        let mut stream = SealStream::with_nonce(&key(), NONCE);
        stream.gcm.skip_to(MAX_PLAINTEXT - 2);
        let mut out = Vec::new();
        assert_eq!(stream.update(b"abc", &mut out), Err(SealError::TooLong));
        assert!(out.is_empty());
        assert_eq!(stream.update(b"ab", &mut out), Ok(()));
        assert_eq!(stream.update(b"c", &mut out), Err(SealError::TooLong));
    }

    #[test]
    fn what_fits_a_room_fills_it_without_passing_it() {
        for room in [0, 3, 4, 15, 16, 17, 20, 64, 4096, 4099, 8 * 1024 * 1024] {
            for carried in [b"".as_slice(), b"a", b"ab", b"abc"] {
                let mut stream = SealStream::with_nonce(&key(), NONCE);
                let mut out = Vec::new();
                stream.update(carried, &mut out).unwrap();
                let before = out.len();
                let fits = stream.fits(room);
                let plaintext = data(fits + 1);
                let mut bigger = Vec::new();
                let mut other = SealStream::with_nonce(&key(), NONCE);
                other.update(carried, &mut bigger).unwrap();
                other.update(&plaintext, &mut bigger).unwrap();
                stream.update(&plaintext[..fits], &mut out).unwrap();
                let appended = out.len() - before;
                assert!(
                    appended <= room,
                    "room {room}, carried {carried:?}: {appended}"
                );
                // One byte more completes one more group, past the room.
                assert!(
                    bigger.len() - before > room,
                    "room {room}, carried {carried:?}"
                );
                // Whole groups: a room that is a multiple of 4 is filled exactly (once the
                // nonce's first 16 bytes of text fit).
                if room % 4 == 0 && (room >= 16 || !carried.is_empty()) {
                    assert_eq!(appended, room, "room {room}, carried {carried:?}");
                }
            }
        }
    }

    #[test]
    fn debug_contains_no_key_material() {
        let stream = SealStream::with_nonce(&key(), NONCE);
        assert_eq!(format!("{stream:?}"), "SealStream(<redacted>)");
    }

    #[test]
    fn simd_base64_gives_rfc_4648s_vectors() {
        // RFC 4648 §10, and bytes that use `+` and `/`.
        let vectors: [(&[u8], &str); 9] = [
            (b"", ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"fooba", "Zm9vYmE="),
            (b"foobar", "Zm9vYmFy"),
            (&[0xfb, 0xff], "+/8="),
            (&[0xff; 6], "////////"),
        ];
        for (bytes, text) in vectors {
            let mut out = Vec::new();
            encode(bytes, &mut out);
            assert_eq!(out, text.as_bytes(), "{bytes:?}");
        }
    }

    #[test]
    fn simd_base64_equals_the_base64_crates_standard_encoding_at_every_length_to_4096() {
        use base64::Engine as _;
        // Random bytes (xorshift), and each length's text appended after a prefix that is
        // kept, as `update` appends to the text already in a part.
        let mut state = 0x853c_49e6_748f_ea9b_u64;
        let bytes: Vec<u8> = (0..4096)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        for len in 0..=4096 {
            let input = &bytes[..len];
            let mut out = b"kept".to_vec();
            encode(input, &mut out);
            let mut expected = b"kept".to_vec();
            expected.extend_from_slice(
                base64::engine::general_purpose::STANDARD
                    .encode(input)
                    .as_bytes(),
            );
            assert_eq!(out, expected, "length {len}");
        }
    }

    proptest! {
        #[test]
        fn simd_base64_equals_the_base64_crates_standard_encoding(
            prefix in proptest::collection::vec(any::<u8>(), 0..8),
            bytes in proptest::collection::vec(any::<u8>(), 0..5000),
        ) {
            use base64::Engine as _;
            let mut out = prefix.clone();
            encode(&bytes, &mut out);
            let mut expected = prefix;
            expected.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(&bytes).as_bytes());
            prop_assert_eq!(out, expected);
        }

        #[test]
        fn streamed_seal_equals_one_shot_for_any_length_and_chunking(
            plaintext in proptest::collection::vec(any::<u8>(), 0..3000),
            mut cuts in proptest::collection::vec(0usize..3000, 0..16),
        ) {
            cuts.sort_unstable();
            let sealed = streamed(&plaintext, &cuts);
            prop_assert_eq!(sealed.len() as u64, SealStream::sealed_len(plaintext.len() as u64));
            prop_assert_eq!(sealed, one_shot(&plaintext));
        }
    }
}

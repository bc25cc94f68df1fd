//! AES-256-GCM sealed blobs of contract §2: `base64std(nonce[12] || ciphertext || tag[16])`.

use std::fmt;

use aes_gcm::aead::rand_core::RngCore as _;
use aes_gcm::aead::OsRng;
use aes_gcm::{AeadInPlace as _, Aes256Gcm, KeyInit as _, Nonce, Tag};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use crate::error::OpenError;
use crate::secret::{Secret32, KEY_LEN};

/// Length of the nonce at the start of a sealed blob.
pub const NONCE_LEN: usize = 12;
/// Length of the authentication tag at the end of a sealed blob.
pub const TAG_LEN: usize = 16;

/// A 32-byte AES-256-GCM key (the credentials or the storage key of contract §1).
///
/// `Debug` prints `CipherKey(<redacted>)`; there is no `Display` and no serialisation. The bytes
/// are wiped when the key is dropped.
#[derive(Clone)]
pub struct CipherKey(Secret32);

impl CipherKey {
    /// Wraps raw key bytes. Meant for tests and tools; the Worker gets its keys from
    /// [`KeySet`](crate::KeySet).
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        Self(Secret32::new(bytes))
    }

    pub(crate) fn from_secret(secret: Secret32) -> Self {
        Self(secret)
    }

    pub(crate) fn secret(&self) -> &Secret32 {
        &self.0
    }

    /// Seals `plaintext` under a fresh random nonce from the OS and returns the base64 text.
    ///
    /// # Panics
    ///
    /// If the OS random source fails, or if `plaintext` exceeds AES-GCM's limit of 64 GiB.
    pub fn seal(&self, plaintext: &[u8]) -> String {
        self.seal_with_nonce(plaintext, random_nonce())
    }

    /// Seals `plaintext` and returns the raw `nonce || ciphertext || tag` bytes, for a caller that
    /// base64-encodes them later (in chunks, say). Encrypts in place: the plaintext buffer becomes
    /// the output, so a large result is never held twice. A buffer with [`NONCE_LEN`] +
    /// [`TAG_LEN`] bytes of spare capacity is not even reallocated.
    ///
    /// # Panics
    ///
    /// As [`seal`](Self::seal).
    pub fn seal_raw(&self, plaintext: Vec<u8>) -> Vec<u8> {
        let mut buffer = plaintext;
        // One reservation for nonce and tag; shifting the plaintext right by 12 bytes then stays
        // within the same allocation.
        buffer.reserve_exact(NONCE_LEN + TAG_LEN);
        buffer.splice(0..0, random_nonce());
        self.encrypt_framed(&mut buffer);
        buffer
    }

    /// Seals with a caller-chosen nonce. **For known-answer tests only**: reusing a nonce under one
    /// key breaks AES-GCM, so production code calls [`seal`](Self::seal).
    ///
    /// # Panics
    ///
    /// If `plaintext` exceeds AES-GCM's limit of 64 GiB.
    #[doc(hidden)]
    pub fn seal_with_nonce(&self, plaintext: &[u8], nonce: [u8; NONCE_LEN]) -> String {
        let mut buffer = Vec::with_capacity(NONCE_LEN + plaintext.len() + TAG_LEN);
        buffer.extend_from_slice(&nonce);
        buffer.extend_from_slice(plaintext);
        self.encrypt_framed(&mut buffer);
        STANDARD.encode(&buffer)
    }

    /// Opens base64 text produced by [`seal`](Self::seal) (or by the Go Worker).
    pub fn open(&self, sealed: &str) -> Result<Vec<u8>, OpenError> {
        self.open_bytes(sealed.as_bytes())
    }

    /// Opens the ASCII base64 text of a sealed blob given as bytes, as a stored object's body
    /// arrives.
    pub fn open_bytes(&self, sealed: &[u8]) -> Result<Vec<u8>, OpenError> {
        let raw = STANDARD.decode(sealed).map_err(|_| OpenError::NotBase64)?;
        self.open_raw(raw)
    }

    /// Opens raw `nonce || ciphertext || tag` bytes (the output of [`seal_raw`](Self::seal_raw)),
    /// decrypting in place: the returned plaintext reuses the input buffer.
    pub fn open_raw(&self, raw: Vec<u8>) -> Result<Vec<u8>, OpenError> {
        let mut buffer = raw;
        let len = buffer.len();
        if len < NONCE_LEN + TAG_LEN {
            return Err(OpenError::TooShort { len });
        }
        let (nonce, rest) = buffer.split_at_mut(NONCE_LEN);
        let (ciphertext, tag) = rest.split_at_mut(len - NONCE_LEN - TAG_LEN);
        self.cipher()
            .decrypt_in_place_detached(
                Nonce::from_slice(nonce),
                &[],
                ciphertext,
                Tag::from_slice(tag),
            )
            .map_err(|_| OpenError::AuthenticationFailed)?;
        buffer.truncate(len - TAG_LEN);
        buffer.drain(..NONCE_LEN);
        Ok(buffer)
    }

    /// Encrypts `buffer[NONCE_LEN..]` in place under the nonce in `buffer[..NONCE_LEN]` and
    /// appends the tag. The caller guarantees the nonce prefix is there.
    fn encrypt_framed(&self, buffer: &mut Vec<u8>) {
        let (nonce, plaintext) = buffer.split_at_mut(NONCE_LEN);
        // Invariant: encryption fails only for plaintexts over 2^36 bytes (64 GiB), far above the
        // 256 MiB result cap; no caller can reach it with a buffer that fits in memory here.
        let tag = self
            .cipher()
            .encrypt_in_place_detached(Nonce::from_slice(nonce), &[], plaintext)
            .expect("plaintext within the AES-GCM length limit");
        buffer.extend_from_slice(&tag);
    }

    fn cipher(&self) -> Aes256Gcm {
        Aes256Gcm::new(self.0.expose().into())
    }
}

impl fmt::Debug for CipherKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CipherKey(<redacted>)")
    }
}

/// A fresh nonce from the OS random source.
pub(crate) fn random_nonce() -> [u8; NONCE_LEN] {
    let mut nonce = [0u8; NONCE_LEN];
    // `OsRng::fill_bytes` panics only if the OS cannot provide randomness, in which case no
    // nonce could be trusted and sealing must not go on.
    OsRng.fill_bytes(&mut nonce);
    nonce
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key() -> CipherKey {
        CipherKey::from_bytes(std::array::from_fn(|i| 200 - i as u8))
    }

    #[test]
    fn two_seals_of_the_same_plaintext_differ() {
        let key = key();
        let first = key.seal(b"same plaintext");
        let second = key.seal(b"same plaintext");
        assert_ne!(first, second);
        assert_eq!(key.open(&first).unwrap(), b"same plaintext");
        assert_eq!(key.open(&second).unwrap(), b"same plaintext");
    }

    #[test]
    fn sealed_blob_is_nonce_ciphertext_and_tag() {
        let raw = STANDARD.decode(key().seal(b"abc")).unwrap();
        assert_eq!(raw.len(), NONCE_LEN + 3 + TAG_LEN);
    }

    #[test]
    fn empty_plaintext_seals_and_opens() {
        let key = key();
        assert_eq!(key.open(&key.seal(b"")).unwrap(), b"");
    }

    #[test]
    fn seal_raw_output_opens_raw_and_as_base64() {
        let key = key();
        let raw = key.seal_raw(b"streamed result".to_vec());
        assert_eq!(raw.len(), NONCE_LEN + 15 + TAG_LEN);
        assert_eq!(
            key.open(&STANDARD.encode(&raw)).unwrap(),
            b"streamed result"
        );
        assert_eq!(key.open_raw(raw).unwrap(), b"streamed result");
    }

    #[test]
    fn seal_raw_and_open_raw_reuse_the_callers_buffer() {
        let key = key();
        let mut plaintext = Vec::with_capacity((1 << 16) + NONCE_LEN + TAG_LEN);
        plaintext.resize(1 << 16, 0x11);
        let before = plaintext.as_ptr();
        let raw = key.seal_raw(plaintext);
        assert_eq!(raw.as_ptr(), before, "sealing in place");
        let sealed_at = raw.as_ptr();
        let opened = key.open_raw(raw).unwrap();
        assert_eq!(opened.as_ptr(), sealed_at, "opening in place");
        assert_eq!(opened, vec![0x11; 1 << 16]);
    }

    #[test]
    fn open_bytes_accepts_the_ascii_text() {
        let key = key();
        let sealed = key.seal(b"object body");
        assert_eq!(key.open_bytes(sealed.as_bytes()).unwrap(), b"object body");
    }

    #[test]
    fn non_base64_text_is_reported_as_not_base64() {
        assert_eq!(
            key().open("not base64!!").unwrap_err(),
            OpenError::NotBase64
        );
        let sealed = key().seal(b"x");
        assert_eq!(
            key().open(&format!("{sealed}\n")).unwrap_err(),
            OpenError::NotBase64
        );
        assert_eq!(
            key().open(sealed.trim_end_matches('=')).unwrap_err(),
            OpenError::NotBase64
        );
    }

    #[test]
    fn a_blob_shorter_than_nonce_and_tag_is_too_short() {
        let short = STANDARD.encode([0u8; NONCE_LEN + TAG_LEN - 1]);
        assert_eq!(
            key().open(&short).unwrap_err(),
            OpenError::TooShort { len: 27 }
        );
        assert_eq!(key().open("").unwrap_err(), OpenError::TooShort { len: 0 });
    }

    #[test]
    fn garbage_of_valid_length_fails_authentication() {
        let garbage = STANDARD.encode([0x42u8; 64]);
        assert_eq!(
            key().open(&garbage).unwrap_err(),
            OpenError::AuthenticationFailed
        );
    }

    #[test]
    fn another_key_fails_authentication() {
        let sealed = key().seal(b"secret");
        let other = CipherKey::from_bytes([9; KEY_LEN]);
        assert_eq!(
            other.open(&sealed).unwrap_err(),
            OpenError::AuthenticationFailed
        );
    }

    #[test]
    fn truncating_the_tag_fails_authentication() {
        let mut raw = key().seal_raw(b"secret".to_vec());
        raw.pop();
        assert_eq!(
            key().open_raw(raw).unwrap_err(),
            OpenError::AuthenticationFailed
        );
    }

    #[test]
    fn debug_contains_no_key_material() {
        let key = key();
        let hex = hex::encode(key.secret().expose());
        let printed = format!("{key:?} {key:#?}");
        assert!(!printed.contains(&hex));
        assert!(!printed.contains(&hex[..8]));
        assert_eq!(format!("{key:?}"), "CipherKey(<redacted>)");
    }

    proptest! {
        #[test]
        fn seal_then_open_round_trips(plaintext in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let key = key();
            prop_assert_eq!(key.open(&key.seal(&plaintext)).unwrap(), plaintext.clone());
            prop_assert_eq!(key.open_raw(key.seal_raw(plaintext.clone())).unwrap(), plaintext);
        }

        #[test]
        fn flipping_any_byte_of_a_sealed_blob_fails_to_open(
            plaintext in proptest::collection::vec(any::<u8>(), 0..512),
            index in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let key = key();
            let mut raw = key.seal_raw(plaintext);
            let at = index.index(raw.len());
            raw[at] ^= flip;
            prop_assert_eq!(
                key.open(&STANDARD.encode(&raw)).unwrap_err(),
                OpenError::AuthenticationFailed
            );
        }
    }
}

//! HMAC-SHA256 keys: lowercase-hex signatures, constant-time verification, incremental signing.

use std::fmt;
use std::io;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::secret::{Secret32, KEY_LEN};

type HmacSha256 = Hmac<Sha256>;

/// A 32-byte HMAC-SHA256 key (the internal or the external key of contract §1).
///
/// `Debug` prints `HmacKey(<redacted>)`; there is no `Display` and no serialisation. The bytes are
/// wiped when the key is dropped.
#[derive(Clone)]
pub struct HmacKey(Secret32);

impl HmacKey {
    /// Wraps raw key bytes. Meant for tests and tools; the Worker gets its keys from
    /// [`KeySet`](crate::KeySet).
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        Self(Secret32::new(bytes))
    }

    pub(crate) fn from_secret(secret: Secret32) -> Self {
        Self(secret)
    }

    #[cfg(test)]
    pub(crate) fn secret(&self) -> &Secret32 {
        &self.0
    }

    /// **Reveals the key** as 64 lowercase hex characters.
    ///
    /// This exists only for the `fetcherctl derive-key` command, which hands the external key to a
    /// consumer that must verify result HMACs and event signatures. Never log its output.
    pub fn reveal_hex(&self) -> String {
        hex::encode(self.0.expose())
    }

    /// Lowercase hex of HMAC-SHA256(key, `data`).
    pub fn sign_hex(&self, data: &[u8]) -> String {
        let mut stream = self.start();
        stream.update(data);
        stream.finish_hex()
    }

    /// Whether `signature_hex` is exactly the lowercase hex HMAC of `data`.
    ///
    /// The comparison runs in constant time over the hex text, so an uppercase signature (or one
    /// with surrounding whitespace) does not verify, as contract §3 requires.
    pub fn verify_hex(&self, data: &[u8], signature_hex: &str) -> bool {
        let expected = self.sign_hex(data);
        expected.as_bytes().ct_eq(signature_hex.as_bytes()).into()
    }

    /// [`verify_hex`](Self::verify_hex) of the concatenation of `parts`, without building it
    /// (a signed payload is a few header lines and a body that may be large).
    pub fn verify_hex_parts(&self, parts: &[&[u8]], signature_hex: &str) -> bool {
        let mut stream = self.start();
        for part in parts {
            stream.update(part);
        }
        let expected = stream.finish_hex();
        expected.as_bytes().ct_eq(signature_hex.as_bytes()).into()
    }

    /// Starts an incremental HMAC, for data that arrives in pieces (such as a streamed result).
    pub fn start(&self) -> HmacStream {
        // Invariant: HMAC accepts keys of any length, so `new_from_slice` cannot fail here.
        let mac =
            HmacSha256::new_from_slice(self.0.expose()).expect("HMAC-SHA256 accepts a 32-byte key");
        HmacStream { mac }
    }
}

impl fmt::Debug for HmacKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HmacKey(<redacted>)")
    }
}

/// Lowercase hex SHA-256 of `data`: the body's digest a dead letter's stamp covers
/// (`contract::dead_letter`).
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest as _;
    digest_hex(&Sha256::digest(data))
}

/// Lowercase hex of a 32-byte digest, through `hex`'s table encoder: `hex::encode` builds the
/// text a `char` at a time (2,200 instructions a digest, against a few hundred), and a job
/// signs and verifies four.
fn digest_hex(digest: &[u8]) -> String {
    let mut text = [0u8; 64];
    match hex::encode_to_slice(digest, &mut text) {
        // Hex digits are ASCII.
        Ok(()) => String::from_utf8_lossy(&text).into_owned(),
        // Not a 32-byte digest (none of ours): the general encoder.
        Err(_) => hex::encode(digest),
    }
}

/// An HMAC-SHA256 in progress, started by [`HmacKey::start`].
///
/// Feed it with [`update`](Self::update) or through [`io::Write`] (which never fails), then call
/// [`finish_hex`](Self::finish_hex). The result equals [`HmacKey::sign_hex`] over the
/// concatenation of everything fed, however it was split.
#[derive(Clone)]
pub struct HmacStream {
    mac: HmacSha256,
}

impl HmacStream {
    /// Feeds the next piece of data.
    pub fn update(&mut self, data: &[u8]) {
        self.mac.update(data);
    }

    /// Lowercase hex of the HMAC of everything fed so far.
    pub fn finish_hex(self) -> String {
        digest_hex(&self.mac.finalize().into_bytes())
    }

    /// Whether everything fed so far has the HMAC `signature_hex`, compared in constant time as
    /// [`HmacKey::verify_hex`] does.
    pub fn verify_hex(self, signature_hex: &str) -> bool {
        let expected = self.finish_hex();
        expected.as_bytes().ct_eq(signature_hex.as_bytes()).into()
    }
}

impl io::Write for HmacStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl fmt::Debug for HmacStream {
    // The inner state is derived from the key, so it is not printed either.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HmacStream(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn digests_are_lowercase_hex_as_the_general_encoder_writes_them() {
        // FIPS 180-2's "abc".
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let digest: Vec<u8> = (0..=255u8).step_by(8).collect();
        assert_eq!(digest_hex(&digest), hex::encode(&digest));
        assert_eq!(digest_hex(b"\x00\xff\x10"), "00ff10");
    }

    fn key() -> HmacKey {
        HmacKey::from_bytes(std::array::from_fn(|i| i as u8 * 7 + 3))
    }

    #[test]
    fn rfc_4231_case_2_signature_is_reproduced() {
        // RFC 4231 test case 2 uses a 4-byte key; HMAC zero-pads short keys, so the same key
        // padded to 32 bytes gives the same MAC.
        let mut bytes = [0u8; KEY_LEN];
        bytes[..4].copy_from_slice(b"Jefe");
        let signature = HmacKey::from_bytes(bytes).sign_hex(b"what do ya want for nothing?");
        assert_eq!(
            signature,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn signature_is_64_lowercase_hex_characters() {
        let signature = key().sign_hex(b"payload");
        assert_eq!(signature.len(), 64);
        assert!(signature
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    }

    #[test]
    fn uppercase_signature_is_rejected() {
        let signature = key().sign_hex(b"payload");
        assert!(key().verify_hex(b"payload", &signature));
        assert!(!key().verify_hex(b"payload", &signature.to_uppercase()));
    }

    #[test]
    fn parts_verify_as_their_concatenation() {
        let signature = key().sign_hex(b"header\nbody");
        assert!(key().verify_hex_parts(&[b"header\n", b"body"], &signature));
        assert!(key().verify_hex_parts(&[b"", b"header\nbody", b""], &signature));
        assert!(!key().verify_hex_parts(&[b"header", b"body"], &signature));
        assert!(!key().verify_hex_parts(&[b"header\n", b"body"], &signature.to_uppercase()));
    }

    #[test]
    fn truncated_empty_or_padded_signatures_are_rejected() {
        let signature = key().sign_hex(b"payload");
        assert!(!key().verify_hex(b"payload", &signature[..63]));
        assert!(!key().verify_hex(b"payload", ""));
        assert!(!key().verify_hex(b"payload", &format!("{signature}\n")));
    }

    #[test]
    fn a_different_key_does_not_verify() {
        let signature = key().sign_hex(b"payload");
        assert!(!HmacKey::from_bytes([1; KEY_LEN]).verify_hex(b"payload", &signature));
    }

    #[test]
    fn debug_of_key_and_stream_contains_no_key_material() {
        let key = key();
        let hex = key.reveal_hex();
        let printed = format!("{key:?} {key:#?} {:?}", key.start());
        assert!(!printed.contains(&hex));
        assert!(!printed.contains(&hex[..8]));
        assert_eq!(format!("{key:?}"), "HmacKey(<redacted>)");
    }

    #[test]
    fn reveal_hex_is_the_lowercase_hex_of_the_bytes() {
        assert_eq!(
            HmacKey::from_bytes([0xab; KEY_LEN]).reveal_hex(),
            "ab".repeat(32)
        );
    }

    #[test]
    fn sha256_hex_is_the_lowercase_hex_digest() {
        assert_eq!(
            sha256_hex(b"hello"),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
    }

    #[test]
    fn io_write_feeds_the_stream() {
        let mut stream = key().start();
        stream.write_all(b"hello ").unwrap();
        write!(stream, "world").unwrap();
        stream.flush().unwrap();
        assert_eq!(stream.finish_hex(), key().sign_hex(b"hello world"));
    }

    proptest! {
        #[test]
        fn sign_then_verify_round_trips(data in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let signature = key().sign_hex(&data);
            prop_assert!(key().verify_hex(&data, &signature));
        }

        #[test]
        fn changing_one_byte_of_data_fails_verification(
            data in proptest::collection::vec(any::<u8>(), 1..2048),
            index in any::<prop::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let signature = key().sign_hex(&data);
            let mut altered = data.clone();
            altered[index.index(data.len())] ^= flip;
            prop_assert!(!key().verify_hex(&altered, &signature));
        }

        #[test]
        fn changing_one_hex_character_fails_verification(
            data in proptest::collection::vec(any::<u8>(), 0..256),
            index in 0usize..64,
            replacement in proptest::sample::select(b"0123456789abcdefABCDEF".to_vec()),
        ) {
            let signature = key().sign_hex(&data);
            let mut altered = signature.clone().into_bytes();
            prop_assume!(altered[index] != replacement);
            altered[index] = replacement;
            let altered = String::from_utf8(altered).unwrap();
            prop_assert!(!key().verify_hex(&data, &altered));
        }

        #[test]
        fn incremental_hmac_equals_one_shot_for_any_chunking(
            data in proptest::collection::vec(any::<u8>(), 0..4096),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..16),
        ) {
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(data.len() + 1)).collect();
            cuts.sort_unstable();
            let mut stream = key().start();
            let mut start = 0;
            for cut in cuts.into_iter().chain([data.len()]) {
                stream.update(&data[start..cut]);
                start = cut;
            }
            prop_assert_eq!(stream.finish_hex(), key().sign_hex(&data));
        }
    }
}

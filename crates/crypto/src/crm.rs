//! The field crypto of upstream's `plugin_crm` path (lib-commons v5.8.0 `commons/crypto`, see
//! `docs/UPSTREAM-MONGO-MSSQL.md` §3): the CRM stores its sensitive fields encrypted and, for
//! searching, their HMACs under `search.*`.
//!
//! - [`CrmHashKey`]: `CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM`, whose **text bytes** are the HMAC-SHA256
//!   key (not hex-decoded); a filter value becomes the lowercase hex of its HMAC.
//! - [`CrmCipher`]: `CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM`, **hex** of a 16, 24 or 32-byte
//!   AES key (AES-128, -192 or -256 in GCM); a stored value is
//!   `base64std(nonce[12] || ciphertext || tag[16])`, no associated data, as contract §2's blobs.
//!
//! Errors name the variable and never carry a byte of a key, a value or a plaintext (upstream's
//! hex error quotes the offending character of the key; this one does not).

use std::fmt;

use aes_gcm::aead::consts::U12;
use aes_gcm::aes::Aes192;
use aes_gcm::{AeadInPlace as _, Aes128Gcm, Aes256Gcm, AesGcm, KeyInit, Nonce, Tag};
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;
use zeroize::Zeroizing;

use crate::error::OpenError;
use crate::seal::{NONCE_LEN, TAG_LEN};

/// The hash key's variable.
pub const CRM_HASH_KEY_VAR: &str = "CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM";
/// The encryption key's variable.
pub const CRM_ENCRYPT_KEY_VAR: &str = "CRYPTO_ENCRYPT_SECRET_KEY_PLUGIN_CRM";

/// Why a `plugin_crm` key cannot be used. Upstream's texts, where they carry no secret.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CrmKeyError {
    #[error("CRM hash secret key not configured ({CRM_HASH_KEY_VAR} is empty)")]
    HashKeyMissing,
    #[error("CRM encrypt secret key not configured ({CRM_ENCRYPT_KEY_VAR} is empty)")]
    EncryptKeyMissing,
    #[error("failed to initialize cipher: {CRM_ENCRYPT_KEY_VAR} is not hex")]
    NotHex,
    #[error(
        "failed to initialize cipher: {CRM_ENCRYPT_KEY_VAR} decodes to {len} bytes; an AES key is \
         16, 24 or 32"
    )]
    BadLength { len: usize },
}

/// The key that hashes filter values for the CRM's `search.*` fields.
#[derive(Clone)]
pub struct CrmHashKey(Zeroizing<Vec<u8>>);

impl CrmHashKey {
    /// The variable's value, used as it is (its UTF-8 bytes are the HMAC key).
    pub fn new(secret: &str) -> Result<CrmHashKey, CrmKeyError> {
        if secret.is_empty() {
            return Err(CrmKeyError::HashKeyMissing);
        }
        Ok(CrmHashKey(Zeroizing::new(secret.as_bytes().to_vec())))
    }

    /// Lowercase hex of HMAC-SHA256(key, `value`): what the CRM stores under `search.*`.
    pub fn hash(&self, value: &str) -> String {
        // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC accepts any key");
        mac.update(value.as_bytes());
        hex::encode(mac.finalize().into_bytes())
    }
}

impl fmt::Debug for CrmHashKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CrmHashKey(<redacted>)")
    }
}

/// The key that opens the CRM's encrypted fields.
#[derive(Clone)]
pub struct CrmCipher(Cipher);

#[derive(Clone)]
enum Cipher {
    Aes128(Box<Aes128Gcm>),
    Aes192(Box<AesGcm<Aes192, U12>>),
    Aes256(Box<Aes256Gcm>),
}

impl CrmCipher {
    /// The variable's value: hex (either case) of a 16, 24 or 32-byte key.
    pub fn from_hex(secret: &str) -> Result<CrmCipher, CrmKeyError> {
        if secret.is_empty() {
            return Err(CrmKeyError::EncryptKeyMissing);
        }
        let key = Zeroizing::new(hex::decode(secret).map_err(|_| CrmKeyError::NotHex)?);
        // The lengths match the ciphers' key sizes, so `new_from_slice` cannot fail below.
        let cipher = match key.len() {
            16 => Cipher::Aes128(Box::new(
                <Aes128Gcm as KeyInit>::new_from_slice(&key).expect("16 bytes"),
            )),
            24 => Cipher::Aes192(Box::new(
                <AesGcm<Aes192, U12> as KeyInit>::new_from_slice(&key).expect("24 bytes"),
            )),
            32 => Cipher::Aes256(Box::new(
                <Aes256Gcm as KeyInit>::new_from_slice(&key).expect("32 bytes"),
            )),
            len => return Err(CrmKeyError::BadLength { len }),
        };
        Ok(CrmCipher(cipher))
    }

    /// Opens one stored value. The plaintext is text as upstream returns it (a Go string): bytes
    /// that are not UTF-8 become U+FFFD, as Go's JSON encoder writes them.
    pub fn decrypt(&self, value: &str) -> Result<String, OpenError> {
        let blob = STANDARD
            .decode(value.as_bytes())
            .map_err(|_| OpenError::NotBase64)?;
        if blob.len() < NONCE_LEN + TAG_LEN {
            return Err(OpenError::TooShort { len: blob.len() });
        }
        let (nonce, rest) = blob.split_at(NONCE_LEN);
        let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
        let mut plaintext = Zeroizing::new(ciphertext.to_vec());
        let (nonce, tag) = (Nonce::from_slice(nonce), Tag::from_slice(tag));
        let opened = match &self.0 {
            Cipher::Aes128(c) => c.decrypt_in_place_detached(nonce, b"", &mut plaintext, tag),
            Cipher::Aes192(c) => c.decrypt_in_place_detached(nonce, b"", &mut plaintext, tag),
            Cipher::Aes256(c) => c.decrypt_in_place_detached(nonce, b"", &mut plaintext, tag),
        };
        opened.map_err(|_| OpenError::AuthenticationFailed)?;
        Ok(String::from_utf8_lossy(&plaintext).into_owned())
    }

    /// Seals `plaintext` under `nonce`, as the CRM stores a field. **For tests only**: the Worker
    /// never encrypts CRM fields, and reusing a nonce under one key breaks AES-GCM.
    #[doc(hidden)]
    pub fn encrypt_with_nonce(&self, plaintext: &[u8], nonce: [u8; NONCE_LEN]) -> String {
        let mut buffer = plaintext.to_vec();
        let nonce_ref = Nonce::from_slice(&nonce);
        // The plaintexts of tests are far below AES-GCM's 64 GiB limit.
        let tag = match &self.0 {
            Cipher::Aes128(c) => c.encrypt_in_place_detached(nonce_ref, b"", &mut buffer),
            Cipher::Aes192(c) => c.encrypt_in_place_detached(nonce_ref, b"", &mut buffer),
            Cipher::Aes256(c) => c.encrypt_in_place_detached(nonce_ref, b"", &mut buffer),
        }
        .expect("a test plaintext within AES-GCM's limit");
        let mut blob = nonce.to_vec();
        blob.extend_from_slice(&buffer);
        blob.extend_from_slice(&tag);
        STANDARD.encode(blob)
    }
}

impl fmt::Debug for CrmCipher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CrmCipher(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Known answers computed with Go's crypto/hmac, crypto/aes and crypto/cipher (the algorithms
    // of lib-commons v5.8.0) and cross-checked with Python's hmac and cryptography
    // (docs/UPSTREAM-MONGO-MSSQL.md §3.4).
    const HASH_KEY: &str = "test-secret-key-for-hashing";
    const AES_KEY: &str = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";
    const NONCE: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];

    #[test]
    fn a_value_hashes_to_upstreams_lowercase_hex_hmac_of_the_key_text() {
        let key = CrmHashKey::new(HASH_KEY).expect("key");
        assert_eq!(
            key.hash("12345678900"),
            "5630239c165c901b5358b2d67abd470cc03b7c9b679589a7daaed252f368b9a9"
        );
        assert_eq!(
            key.hash("john@example.com"),
            "387dc0bf563e209411b82b00e82749d3ff01fc40d11062fd04367913d9f2a108"
        );
        // A key that looks like hex is still used as text.
        let hexlike =
            CrmHashKey::new("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
                .expect("key");
        assert_eq!(
            hexlike.hash("12345678900"),
            "4da30fe8d542efb5e45f9ef3e6b8cee02ac7a1e802ba81b2ae997d89fec5b72e"
        );
    }

    #[test]
    fn stored_values_open_to_their_known_plaintexts() {
        let cipher = CrmCipher::from_hex(AES_KEY).expect("key");
        for (stored, plain) in [
            (
                "AAECAwQFBgcICQoLyB/IOKq2fZrou8rDKPQVBtnImJNPwT+07R6g",
                "12345678900",
            ),
            (
                "AAECAwQFBgcICQoLs0KTYr/EJcdOb7I3rrIP1HMUp34L/W5G",
                "John Doe",
            ),
            ("AAECAwQFBgcICQoLGO6uLQo+KYzMdp/hMi1Y7Q==", ""),
        ] {
            assert_eq!(cipher.decrypt(stored).expect("opens"), plain);
            assert_eq!(cipher.encrypt_with_nonce(plain.as_bytes(), NONCE), stored);
        }
        // Upper-case hex is the same key.
        let upper = CrmCipher::from_hex(&AES_KEY.to_uppercase()).expect("key");
        assert_eq!(
            upper
                .decrypt("AAECAwQFBgcICQoLs0KTYr/EJcdOb7I3rrIP1HMUp34L/W5G")
                .expect("opens"),
            "John Doe"
        );
    }

    #[test]
    fn aes_128_and_192_keys_open_what_they_sealed() {
        for key in [&AES_KEY[..32], &AES_KEY[..48]] {
            let cipher = CrmCipher::from_hex(key).expect("key");
            let stored = cipher.encrypt_with_nonce(b"Ada Lovelace", NONCE);
            assert_eq!(cipher.decrypt(&stored).expect("opens"), "Ada Lovelace");
            let other = CrmCipher::from_hex(AES_KEY).expect("key");
            assert_eq!(other.decrypt(&stored), Err(OpenError::AuthenticationFailed));
        }
    }

    #[test]
    fn bad_keys_and_values_fail_without_echoing_them() {
        assert_eq!(
            CrmHashKey::new("").unwrap_err(),
            CrmKeyError::HashKeyMissing
        );
        assert_eq!(
            CrmCipher::from_hex("").unwrap_err(),
            CrmKeyError::EncryptKeyMissing
        );
        let not_hex = CrmCipher::from_hex("zq11zq11").unwrap_err();
        assert_eq!(not_hex, CrmKeyError::NotHex);
        // Upstream's text quotes the offending character ("invalid byte: U+007A 'z'").
        assert!(!not_hex.to_string().contains("zq11") && !not_hex.to_string().contains("'z'"));
        assert_eq!(
            CrmCipher::from_hex("0011223344556677889900").unwrap_err(),
            CrmKeyError::BadLength { len: 11 }
        );
        let cipher = CrmCipher::from_hex(AES_KEY).expect("key");
        assert_eq!(cipher.decrypt("a?b"), Err(OpenError::NotBase64));
        assert_eq!(cipher.decrypt("AAEC"), Err(OpenError::TooShort { len: 3 }));
        let mut tampered = cipher
            .encrypt_with_nonce(b"12345678900", NONCE)
            .into_bytes();
        tampered[20] = if tampered[20] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).expect("base64 text");
        assert_eq!(
            cipher.decrypt(&tampered),
            Err(OpenError::AuthenticationFailed)
        );
        assert_eq!(format!("{cipher:?}"), "CrmCipher(<redacted>)");
        assert_eq!(
            format!("{:?}", CrmHashKey::new(HASH_KEY).expect("key")),
            "CrmHashKey(<redacted>)"
        );
    }

    #[test]
    fn a_plaintext_that_is_not_utf8_reads_as_go_writes_it() {
        let cipher = CrmCipher::from_hex(AES_KEY).expect("key");
        let stored = cipher.encrypt_with_nonce(b"a\xffb", NONCE);
        assert_eq!(cipher.decrypt(&stored).expect("opens"), "a\u{fffd}b");
    }
}

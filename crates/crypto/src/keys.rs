//! `APP_ENC_KEY` → the four HKDF-SHA256 subkeys of contract §1.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use hkdf::Hkdf;
use sha2::Sha256;
use zeroize::{Zeroize, Zeroizing};

use crate::error::KeyError;
use crate::secret::{Secret32, KEY_LEN};
use crate::{CipherKey, HmacKey};

/// HKDF `info` of the key that seals datasource passwords in the connections table.
pub const CREDENTIALS_LABEL: &str = "fetcher-credentials-v1";
/// HKDF `info` of the key that verifies inbound job message signatures.
pub const INTERNAL_HMAC_LABEL: &str = "fetcher-internal-hmac-v1";
/// HKDF `info` of the key for the result HMAC and the signature of published events.
pub const EXTERNAL_HMAC_LABEL: &str = "fetcher-external-hmac-v1";
/// HKDF `info` of the key that seals stored results.
pub const STORAGE_LABEL: &str = "fetcher-storage-encryption-v1";

/// Minimum length in bytes of the decoded master key.
pub const MIN_MASTER_LEN: usize = 32;

/// The four keys derived from the master key. The master itself is not kept.
///
/// `Debug` prints no key material; there is no `Display` and no serialisation.
#[derive(Clone)]
pub struct KeySet {
    credentials: CipherKey,
    internal_hmac: HmacKey,
    external_hmac: HmacKey,
    storage: CipherKey,
}

impl KeySet {
    /// Decodes `APP_ENC_KEY` (strict standard base64 with padding; surrounding whitespace or line
    /// breaks are rejected, not trimmed) and derives the key set from it.
    ///
    /// The decoded master is wiped before this returns, whether or not it succeeds.
    pub fn from_base64(app_enc_key: &str) -> Result<Self, KeyError> {
        if app_enc_key.is_empty() {
            return Err(KeyError::Empty);
        }
        // The base64 error is dropped on purpose: it can quote an offending byte of the key.
        let master = Zeroizing::new(
            STANDARD
                .decode(app_enc_key)
                .map_err(|_| KeyError::NotBase64)?,
        );
        Self::from_master_bytes(&master)
    }

    /// Derives the key set from the raw (already decoded) master key.
    pub fn from_master_bytes(master: &[u8]) -> Result<Self, KeyError> {
        if master.is_empty() {
            return Err(KeyError::Empty);
        }
        if master.len() < MIN_MASTER_LEN {
            return Err(KeyError::TooShort { len: master.len() });
        }
        // No salt: HKDF then uses a block of zeros, which is what contract §1 specifies.
        let hkdf = Hkdf::<Sha256>::new(None, master);
        Ok(Self {
            credentials: CipherKey::from_secret(derive(&hkdf, CREDENTIALS_LABEL)),
            internal_hmac: HmacKey::from_secret(derive(&hkdf, INTERNAL_HMAC_LABEL)),
            external_hmac: HmacKey::from_secret(derive(&hkdf, EXTERNAL_HMAC_LABEL)),
            storage: CipherKey::from_secret(derive(&hkdf, STORAGE_LABEL)),
        })
    }

    /// AES-256-GCM key for datasource passwords (`fetcher-credentials-v1`).
    pub fn credentials(&self) -> &CipherKey {
        &self.credentials
    }

    /// HMAC key that verifies inbound job messages (`fetcher-internal-hmac-v1`).
    pub fn internal_hmac(&self) -> &HmacKey {
        &self.internal_hmac
    }

    /// HMAC key for the result HMAC and outbound event signatures (`fetcher-external-hmac-v1`).
    pub fn external_hmac(&self) -> &HmacKey {
        &self.external_hmac
    }

    /// AES-256-GCM key for stored results (`fetcher-storage-encryption-v1`).
    pub fn storage(&self) -> &CipherKey {
        &self.storage
    }
}

impl fmt::Debug for KeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeySet(<redacted>)")
    }
}

/// One HKDF-Expand to a 32-byte key.
fn derive(hkdf: &Hkdf<Sha256>, label: &str) -> Secret32 {
    let mut okm = [0u8; KEY_LEN];
    // Invariant: HKDF-SHA256 can expand up to 255 * 32 bytes; 32 is always within range.
    hkdf.expand(label.as_bytes(), &mut okm)
        .expect("32 bytes is a valid HKDF-SHA256 output length");
    let secret = Secret32::new(okm);
    okm.zeroize();
    secret
}

#[cfg(test)]
mod tests {
    use super::*;

    const MASTER: &str = "dGhpcy1pcy1hLTMyLWJ5dGUtbWFzdGVyLWtleTEyMzQ=";

    #[test]
    fn empty_key_is_rejected_as_empty() {
        assert_eq!(KeySet::from_base64("").unwrap_err(), KeyError::Empty);
    }

    #[test]
    fn a_trailing_newline_is_rejected_not_trimmed() {
        let err = KeySet::from_base64(&format!("{MASTER}\n")).unwrap_err();
        assert_eq!(err, KeyError::NotBase64);
    }

    #[test]
    fn unpadded_base64_is_rejected() {
        let err = KeySet::from_base64(MASTER.trim_end_matches('=')).unwrap_err();
        assert_eq!(err, KeyError::NotBase64);
    }

    #[test]
    fn url_safe_alphabet_is_rejected() {
        // 33 bytes of 0xfb encode to `+` and `/` only in the standard alphabet.
        let standard = STANDARD.encode([0xfb; 33]);
        let url_safe = standard.replace('+', "-").replace('/', "_");
        assert!(KeySet::from_base64(&standard).is_ok());
        assert_eq!(
            KeySet::from_base64(&url_safe).unwrap_err(),
            KeyError::NotBase64
        );
    }

    #[test]
    fn thirty_one_bytes_are_too_short() {
        let err = KeySet::from_base64(&STANDARD.encode([7u8; 31])).unwrap_err();
        assert_eq!(err, KeyError::TooShort { len: 31 });
    }

    #[test]
    fn a_longer_master_is_accepted() {
        assert!(KeySet::from_base64(&STANDARD.encode([7u8; 64])).is_ok());
    }

    #[test]
    fn the_four_derived_keys_are_distinct() {
        let keys = KeySet::from_base64(MASTER).unwrap();
        let all = [
            keys.credentials().secret().expose(),
            keys.internal_hmac().secret().expose(),
            keys.external_hmac().secret().expose(),
            keys.storage().secret().expose(),
        ];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn key_set_debug_contains_no_key_material() {
        let keys = KeySet::from_base64(MASTER).unwrap();
        let printed = format!("{keys:?} {keys:#?}");
        for hex in [
            keys.external_hmac().reveal_hex(),
            keys.internal_hmac().reveal_hex(),
            hex::encode(keys.credentials().secret().expose()),
            hex::encode(keys.storage().secret().expose()),
        ] {
            assert!(!printed.contains(&hex));
            assert!(!printed.contains(&hex[..8]));
        }
        assert!(!printed.contains(MASTER));
        assert!(!printed.contains(&MASTER[..8]));
    }

    #[test]
    fn error_messages_name_the_variable_but_not_the_value() {
        let bad = STANDARD.encode([9u8; 20]);
        for input in ["", "%%%not base64%%%", bad.as_str()] {
            let message = KeySet::from_base64(input).unwrap_err().to_string();
            assert!(message.contains("APP_ENC_KEY"), "{message}");
            if !input.is_empty() {
                assert!(!message.contains(input), "{message}");
            }
        }
    }
}

//! Keys, sealing and signing for the Fetcher Worker: everything secret-bearing in one pure crate.
//!
//! This crate owns contract §1 and §2 and the HMAC primitive of §3 and §8:
//!
//! - [`KeySet`]: decodes `APP_ENC_KEY` and derives the four HKDF-SHA256 subkeys (credentials,
//!   internal HMAC, external HMAC, storage). The master key is wiped after derivation.
//! - [`CipherKey`]: AES-256-GCM sealed blobs, `base64std(nonce[12] || ciphertext || tag[16])`,
//!   no associated data, random nonces from the OS.
//! - [`HmacKey`]: lowercase-hex HMAC-SHA256, constant-time verification, and an incremental
//!   [`HmacStream`] for streamed data.
//!
//! Key types wipe their bytes on drop and print nothing of them through `Debug`; they implement
//! neither `Display` nor `Serialize`. Errors never carry key bytes, blobs or plaintext.
//!
//! ```
//! use crypto::KeySet;
//!
//! // In the Worker this is the value of `APP_ENC_KEY`; here, 32 zero bytes.
//! let keys = KeySet::from_base64("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")?;
//!
//! let sealed = keys.storage().seal(b"{}");
//! assert_eq!(keys.storage().open(&sealed)?, b"{}");
//!
//! let hmac = keys.external_hmac().sign_hex(b"{}");
//! assert!(keys.external_hmac().verify_hex(b"{}", &hmac));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Layout
//!
//! - `keys`: [`KeySet`] and the HKDF labels.
//! - `seal`: [`CipherKey`], sealing and opening.
//! - `seal_stream`: [`SealStream`], the same sealed text produced piece by piece in constant
//!   memory.
//! - `open_stream`: [`OpenStream`], its inverse, for a stored object read piece by piece.
//! - `gcm`: the private incremental AES-256-GCM behind it, composed from `aes`, `ctr` and a
//!   GHASH (`gcm::clmul`, eight blocks per reduction with PCLMULQDQ, or the `ghash` crate).
//! - `cost` (tests only): CPU seconds per GiB of the old and new GHASH, AES-GCM and seal.
//! - `sign`: [`HmacKey`] and [`HmacStream`].
//! - `secret`: the private zeroizing 32-byte buffer behind every key.
//! - `crm`: [`CrmHashKey`] and [`CrmCipher`], upstream `plugin_crm`'s filter hashes and field
//!   decryption (AES-128/192/256-GCM under a hex key).
//! - `error`: [`KeyError`], [`OpenError`] and [`SealError`].
//!
//! # Dependencies
//!
//! Pure code: this crate depends on no other crate of the workspace and on no I/O crate. Its only
//! contact with the outside world is the OS random source, for nonces.

#[cfg(test)]
mod cost;
mod crm;
mod error;
mod gcm;
mod keys;
mod open_stream;
mod seal;
mod seal_stream;
mod secret;
mod sign;

pub use crm::{CrmCipher, CrmHashKey, CrmKeyError, CRM_ENCRYPT_KEY_VAR, CRM_HASH_KEY_VAR};
pub use error::{KeyError, OpenError, SealError};
pub use keys::{
    KeySet, CREDENTIALS_LABEL, EXTERNAL_HMAC_LABEL, INTERNAL_HMAC_LABEL, MIN_MASTER_LEN,
    STORAGE_LABEL,
};
pub use open_stream::OpenStream;
pub use seal::{CipherKey, NONCE_LEN, TAG_LEN};
pub use seal_stream::SealStream;
pub use sign::{sha256_hex, HmacKey, HmacStream};

/// Length in bytes of every derived key.
pub const KEY_LEN: usize = secret::KEY_LEN;

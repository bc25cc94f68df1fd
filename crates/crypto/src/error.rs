//! Errors of key loading and of opening sealed blobs; none of them carries secret material.

use thiserror::Error;

/// Why `APP_ENC_KEY` could not be turned into a [`KeySet`](crate::KeySet).
///
/// Every message names the variable and never echoes its value or any byte of it, so the error can
/// be logged or printed at startup as it is.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    /// The variable is set but empty.
    #[error("APP_ENC_KEY is empty; it must be standard base64 of at least 32 random bytes")]
    Empty,
    /// The text is not strict standard base64 (alphabet `A-Z a-z 0-9 + /`, `=` padding required,
    /// no whitespace or line breaks).
    #[error(
        "APP_ENC_KEY is not standard base64 with padding (no whitespace or line breaks allowed)"
    )]
    NotBase64,
    /// The text decodes to fewer than 32 bytes. Only the length is reported, never the bytes.
    #[error("APP_ENC_KEY decodes to {len} bytes; at least 32 are required")]
    TooShort {
        /// Number of bytes the variable decoded to.
        len: usize,
    },
}

/// Why a sealed blob could not be opened.
///
/// The messages carry neither the blob nor any plaintext.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OpenError {
    /// The text is not strict standard base64 with padding.
    #[error("sealed blob is not standard base64 with padding")]
    NotBase64,
    /// The decoded blob cannot even hold a 12-byte nonce and a 16-byte tag.
    #[error("sealed blob is {len} bytes; at least 28 (nonce and tag) are required")]
    TooShort {
        /// Number of bytes the blob decoded to.
        len: usize,
    },
    /// The tag did not verify: wrong key, or the blob was altered or truncated.
    #[error("sealed blob failed authentication (wrong key, or the blob was altered)")]
    AuthenticationFailed,
}

/// Why a streamed seal refused a piece of plaintext.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SealError {
    /// The plaintext would pass AES-GCM's limit for one nonce (64 GiB - 32 bytes). The piece was
    /// not consumed; the stream cannot seal more.
    #[error("plaintext exceeds the AES-GCM limit of 68719476704 bytes for one nonce")]
    TooLong,
}

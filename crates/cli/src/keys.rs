//! Where the commands get their keys: the master key from `APP_ENC_KEY`, or an HMAC key (external
//! or internal) as the hex text `derive-key` prints. No message ever contains a key or any part
//! of one.

use anyhow::{anyhow, bail, Context};
use crypto::{HmacKey, KeySet};

/// The variable holding the master key (contract §1).
pub const MASTER_KEY_ENV: &str = "APP_ENC_KEY";

/// Whether `APP_ENC_KEY` holds anything (empty counts as unset, as in [`from_env`]).
pub fn master_is_set() -> bool {
    std::env::var_os(MASTER_KEY_ENV).is_some_and(|value| !value.is_empty())
}

/// The key set derived from `APP_ENC_KEY`; `why` says what the command needs it for.
pub fn from_env(why: &str) -> anyhow::Result<KeySet> {
    let master = std::env::var(MASTER_KEY_ENV)
        .ok()
        .filter(|value| !value.is_empty())
        .ok_or_else(|| anyhow!("{MASTER_KEY_ENV} is not set ({why})"))?;
    // The error names APP_ENC_KEY and what is wrong with it, never the value.
    KeySet::from_base64(&master).context("Failed to derive the keys")
}

/// The external HMAC key from its 64-character hex form (either case; surrounding whitespace is
/// ignored). `source` names where the text came from, for the error.
pub fn external_from_hex(text: &str, source: &str) -> anyhow::Result<HmacKey> {
    hmac_from_hex(text, source, "external HMAC key", "fetcherctl derive-key")
}

/// The internal HMAC key (what signs job messages) from its hex form, as
/// [`external_from_hex`] reads the external one.
pub fn internal_from_hex(text: &str, source: &str) -> anyhow::Result<HmacKey> {
    hmac_from_hex(
        text,
        source,
        "internal HMAC key",
        "fetcherctl derive-key --internal",
    )
}

/// 32 bytes from 64 hex characters; `which` names the key and `printer` the command that prints
/// it, for the error.
fn hmac_from_hex(text: &str, source: &str, which: &str, printer: &str) -> anyhow::Result<HmacKey> {
    let text = text.trim();
    if text.len() != 64 {
        bail!(
            "{source} must be the 64 hex characters of the {which} (as `{printer}` prints it), \
             got {} characters",
            text.len()
        );
    }
    let mut bytes = [0u8; 32];
    // The decoding error would quote the offending character: a part of the key. Not kept.
    hex::decode_to_slice(text, &mut bytes)
        .map_err(|_| anyhow!("{source} must be the {which} in hexadecimal (0-9, a-f)"))?;
    Ok(HmacKey::from_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_keys_round_trip_through_reveal() {
        let keys = KeySet::from_base64("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
            .expect("valid master");
        let hex = keys.external_hmac().reveal_hex();
        for text in [hex.clone(), hex.to_uppercase(), format!("  {hex}\n")] {
            let key = external_from_hex(&text, "--hmac-key").expect("valid hex");
            assert_eq!(key.sign_hex(b"x"), keys.external_hmac().sign_hex(b"x"));
        }
        let hex = keys.internal_hmac().reveal_hex();
        let key = internal_from_hex(&hex.to_uppercase(), "--hmac-key").expect("valid hex");
        assert_eq!(key.sign_hex(b"x"), keys.internal_hmac().sign_hex(b"x"));
    }

    #[test]
    fn bad_hex_is_refused_without_echoing_it() {
        for text in ["abc", &"g".repeat(64), &"0".repeat(65)] {
            for read in [external_from_hex, internal_from_hex] {
                let error = read(text, "--hmac-key").expect_err(text);
                let message = error.to_string();
                assert!(message.contains("--hmac-key"), "{message}");
                assert!(!message.contains(text), "{message}");
            }
        }
        let error = internal_from_hex("abc", "--hmac-key").expect_err("short");
        assert!(error.to_string().contains("internal HMAC key"), "{error}");
    }
}

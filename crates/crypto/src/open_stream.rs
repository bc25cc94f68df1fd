//! Opening the sealed base64 text of contract §2 piece by piece, as a stored object's body
//! arrives, in memory independent of its length.

use std::fmt;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use subtle::ConstantTimeEq as _;

use crate::error::OpenError;
use crate::gcm::Gcm;
use crate::seal::{CipherKey, NONCE_LEN, TAG_LEN};

/// Base64 text decoded per step (a multiple of the 4-character group).
const TEXT_STEP: usize = 64 * 1024;

/// An open in progress, the inverse of [`SealStream`](crate::SealStream).
///
/// Feed the base64 text with [`update`](Self::update) in pieces of any size, then call
/// [`finish`](Self::finish). It accepts exactly the text [`CipherKey::open`] accepts and fails
/// with the same [`OpenError`] where that does.
///
/// **The plaintext `update` appends is not authenticated** until `finish` returns `Ok`: GCM's tag
/// comes last. A caller must treat everything appended as untrusted and discard it (never act on
/// it, publish it or keep it) when any call fails.
pub struct OpenStream {
    key: CipherKey,
    /// Started once the nonce has been decoded.
    gcm: Option<Gcm>,
    /// Base64 characters not decoded yet: the last complete group is always held back (it may
    /// carry the padding, which only the end may have) with up to three characters after it.
    text: Vec<u8>,
    /// Decoded bytes not released yet: the nonce until it is complete, then the last 16 bytes
    /// (the tag, if the text ends here).
    raw: Vec<u8>,
    /// Bytes decoded so far, for [`OpenError::TooShort`].
    decoded: u64,
}

impl OpenStream {
    /// Starts opening text sealed under `key`.
    pub fn new(key: &CipherKey) -> Self {
        Self {
            key: key.clone(),
            gcm: None,
            text: Vec::with_capacity(TEXT_STEP + 8),
            raw: Vec::with_capacity(NONCE_LEN + TAG_LEN + TEXT_STEP / 4 * 3),
            decoded: 0,
        }
    }

    /// Decodes and decrypts the next piece of base64 text, appending the (not yet authenticated)
    /// plaintext it completes to `out`.
    ///
    /// # Errors
    ///
    /// [`OpenError::NotBase64`] as soon as the text cannot be standard padded base64 (padding
    /// before the end included). The stream is unusable after an error.
    pub fn update(&mut self, text: &[u8], out: &mut Vec<u8>) -> Result<(), OpenError> {
        for piece in text.chunks(TEXT_STEP) {
            self.text.extend_from_slice(piece);
            let total = self.text.len();
            // Hold back the last complete group and any characters after it.
            let keep = total % 4 + 4;
            if total <= keep {
                continue;
            }
            let ready = total - keep;
            if self.text[..ready].contains(&b'=') {
                return Err(OpenError::NotBase64);
            }
            decode(&self.text[..ready], &mut self.raw)?;
            self.decoded += ready as u64 / 4 * 3;
            self.text.drain(..ready);
            self.release(out)?;
        }
        Ok(())
    }

    /// Decodes the last group, checks the tag and appends the last plaintext to `out`.
    ///
    /// # Errors
    ///
    /// [`OpenError::NotBase64`] if the text does not end as standard padded base64,
    /// [`OpenError::TooShort`] if it decodes to fewer than 28 bytes, and
    /// [`OpenError::AuthenticationFailed`] if the tag does not verify: then the whole plaintext
    /// appended so far must be discarded.
    pub fn finish(mut self, out: &mut Vec<u8>) -> Result<(), OpenError> {
        if !self.text.len().is_multiple_of(4) {
            return Err(OpenError::NotBase64);
        }
        let before = self.raw.len();
        let text = std::mem::take(&mut self.text);
        decode(&text, &mut self.raw)?;
        self.decoded += (self.raw.len() - before) as u64;
        self.release(out)?;
        let (Some(gcm), TAG_LEN) = (self.gcm.take(), self.raw.len()) else {
            return Err(OpenError::TooShort {
                // Invariant: fewer than 28 bytes were decoded, which fits in usize.
                len: usize::try_from(self.decoded).expect("under 28"),
            });
        };
        let expected = gcm.finish();
        if bool::from(expected.ct_eq(&self.raw[..])) {
            Ok(())
        } else {
            Err(OpenError::AuthenticationFailed)
        }
    }

    /// Starts the cipher once the nonce is complete, then decrypts and appends every decoded byte
    /// except the last 16, which may be the tag.
    fn release(&mut self, out: &mut Vec<u8>) -> Result<(), OpenError> {
        if self.gcm.is_none() {
            if self.raw.len() < NONCE_LEN {
                return Ok(());
            }
            let nonce: [u8; NONCE_LEN] = self.raw[..NONCE_LEN]
                .try_into()
                .expect("slice of NONCE_LEN bytes");
            self.gcm = Some(Gcm::new(self.key.secret().expose(), &nonce));
            self.raw.drain(..NONCE_LEN);
        }
        let Some(gcm) = self.gcm.as_mut() else {
            return Ok(());
        };
        if self.raw.len() > TAG_LEN {
            let ready = self.raw.len() - TAG_LEN;
            // A ciphertext past GCM's limit cannot have been sealed: it cannot authenticate.
            gcm.decrypt(&mut self.raw[..ready])
                .map_err(|_| OpenError::AuthenticationFailed)?;
            out.extend_from_slice(&self.raw[..ready]);
            self.raw.drain(..ready);
        }
        Ok(())
    }
}

/// Appends the decoded bytes of `text` (a whole number of groups) to `raw`.
fn decode(text: &[u8], raw: &mut Vec<u8>) -> Result<(), OpenError> {
    let at = raw.len();
    raw.resize(at + text.len() / 4 * 3, 0);
    let written = STANDARD
        .decode_slice(text, &mut raw[at..])
        .map_err(|_| OpenError::NotBase64)?;
    raw.truncate(at + written);
    Ok(())
}

impl fmt::Debug for OpenStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OpenStream(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn key() -> CipherKey {
        CipherKey::from_bytes(std::array::from_fn(|i| 5 * i as u8 + 2))
    }

    /// Opens `text` cut at `cuts` (sorted offsets, clamped to the length).
    fn opened(text: &[u8], cuts: &[usize]) -> Result<Vec<u8>, OpenError> {
        let mut stream = OpenStream::new(&key());
        let mut out = Vec::new();
        let mut start = 0;
        for &cut in cuts.iter().chain([&text.len()]) {
            let end = cut.clamp(start, text.len());
            stream.update(&text[start..end], &mut out)?;
            start = end;
        }
        stream.finish(&mut out)?;
        Ok(out)
    }

    #[test]
    fn sealed_text_opens_in_any_split() {
        for len in [0, 1, 2, 3, 15, 16, 17, 100, 200_000] {
            let plaintext: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let sealed = key().seal(&plaintext);
            let text = sealed.as_bytes();
            assert_eq!(opened(text, &[]).unwrap(), plaintext, "len {len}");
            let thirds = [text.len() / 3, text.len() / 2, text.len() - 1];
            assert_eq!(opened(text, &thirds).unwrap(), plaintext, "len {len}");
        }
    }

    #[test]
    fn errors_match_the_one_shot_open() {
        let sealed = key().seal(b"x");
        let short = STANDARD.encode([0u8; NONCE_LEN + TAG_LEN - 1]);
        let garbage = STANDARD.encode([0x42u8; 64]);
        let cases = [
            String::new(),
            "not base64!!".to_owned(),
            format!("{sealed}\n"),
            sealed.trim_end_matches('=').to_owned(),
            format!("{sealed}{sealed}"),
            short,
            garbage,
            CipherKey::from_bytes([9; 32]).seal(b"other key"),
        ];
        for text in cases {
            assert_eq!(
                opened(text.as_bytes(), &[]),
                key().open(&text),
                "{text:?} whole"
            );
            let cuts: Vec<usize> = (0..text.len()).collect();
            assert_eq!(
                opened(text.as_bytes(), &cuts),
                key().open(&text),
                "{text:?} bytewise"
            );
        }
    }

    proptest! {
        #[test]
        fn open_stream_agrees_with_open_on_any_text_and_chunking(
            plaintext in proptest::collection::vec(any::<u8>(), 0..600),
            flip in proptest::option::of((any::<prop::sample::Index>(), 1u8..=255)),
            mut cuts in proptest::collection::vec(0usize..900, 0..10),
        ) {
            cuts.sort_unstable();
            let mut text = key().seal(&plaintext).into_bytes();
            if let Some((index, flip)) = flip {
                let at = index.index(text.len());
                text[at] ^= flip;
            }
            prop_assert_eq!(opened(&text, &cuts), key().open_bytes(&text));
        }
    }
}

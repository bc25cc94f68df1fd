//! A result's plaintext turned into what is stored and what its event says, as it streams: the
//! HMAC-SHA256 of the plaintext (contract §6's `hmac`) and the AES-256-GCM seal's base64 text
//! (contract §2), both computed chunk by chunk on the blocking pool, off the async threads.

use std::time::Duration;

use crypto::{HmacStream, KeySet, SealStream};
use tokio::time::Instant;

/// The HMAC and the seal of a result in progress.
pub(super) struct Sealing {
    hmac: HmacStream,
    seal: SealStream,
    /// The stored text of the last chunk; its allocation is reused by the next chunk.
    text: Vec<u8>,
    /// Time spent sealing so far.
    took: Duration,
}

/// Why a chunk could not be sealed.
#[derive(Debug, thiserror::Error)]
pub(super) enum SealingError {
    #[error("the result is too long to seal under one nonce")]
    TooLong,
    #[error("sealing the result was interrupted: {0}")]
    Interrupted(String),
}

impl Sealing {
    pub fn new(keys: &KeySet) -> Sealing {
        Sealing {
            hmac: keys.external_hmac().start(),
            seal: SealStream::new(keys.storage()),
            text: Vec::new(),
            took: Duration::ZERO,
        }
    }

    /// Takes the next chunk of plaintext; returns the state, whose [`text`](Self::text) is the
    /// stored text the chunk completes.
    pub async fn update(self, chunk: Vec<u8>) -> Result<Sealing, SealingError> {
        let Sealing {
            mut hmac,
            mut seal,
            mut text,
            took,
        } = self;
        let started = Instant::now();
        let sealed = tokio::task::spawn_blocking(move || {
            hmac.update(&chunk);
            // The previous chunk's text was written already: its room is filled again rather
            // than a new one allocated per chunk.
            text.clear();
            seal.update(&chunk, &mut text).map(|()| (hmac, seal, text))
        })
        .await
        .map_err(|e| SealingError::Interrupted(e.to_string()))?;
        let (hmac, seal, text) = sealed.map_err(|_| SealingError::TooLong)?;
        let took = took + started.elapsed();
        Ok(Sealing {
            hmac,
            seal,
            text,
            took,
        })
    }

    /// The stored text of the last chunk taken.
    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// Ends the seal: the plaintext's HMAC (hex), the last of the stored text, and the time
    /// spent sealing.
    pub fn finish(self) -> (String, Vec<u8>, Duration) {
        let mut tail = self.text;
        tail.clear();
        self.seal.finish(&mut tail);
        (self.hmac.finish_hex(), tail, self.took)
    }
}

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
            took: Duration::ZERO,
        }
    }

    /// Takes the next chunk of plaintext; returns the state and the stored text it completes.
    pub async fn update(self, chunk: Vec<u8>) -> Result<(Sealing, Vec<u8>), SealingError> {
        let Sealing {
            mut hmac,
            mut seal,
            took,
        } = self;
        let started = Instant::now();
        let sealed = tokio::task::spawn_blocking(move || {
            hmac.update(&chunk);
            let mut text = Vec::with_capacity(chunk.len() / 3 * 4 + 4);
            seal.update(&chunk, &mut text).map(|()| (hmac, seal, text))
        })
        .await
        .map_err(|e| SealingError::Interrupted(e.to_string()))?;
        let (hmac, seal, text) = sealed.map_err(|_| SealingError::TooLong)?;
        let took = took + started.elapsed();
        Ok((Sealing { hmac, seal, took }, text))
    }

    /// Ends the seal: the plaintext's HMAC (hex), the last of the stored text, and the time
    /// spent sealing.
    pub fn finish(self) -> (String, Vec<u8>, Duration) {
        let mut tail = Vec::with_capacity(32);
        self.seal.finish(&mut tail);
        (self.hmac.finish_hex(), tail, self.took)
    }
}

//! A result's plaintext turned into what is stored and what its event says, as it streams: the
//! HMAC-SHA256 of the plaintext (contract §6's `hmac`) and the AES-256-GCM seal's base64 text
//! (contract §2), both computed chunk by chunk on the blocking pool, off the async threads (a
//! small chunk, such as a small job's whole result, in place: see [`INLINE_SEAL_BYTES`]), the
//! text appended straight into the upload's part buffer.

use std::time::Duration;

use crypto::{HmacStream, KeySet, SealStream};
use storage::PartBuffer;
use tokio::time::Instant;

/// Chunks of at most this many bytes left to seal are sealed on the async thread that has them
/// rather than on the blocking pool. Handing a chunk to the pool and back wakes two threads (a
/// few system calls and context switches), more than sealing 16 KiB costs (HMAC, AES-GCM and
/// base64 at about 2 ns a byte: some 30 µs, within what a task may run between awaits). A
/// small job's result is one such chunk; a big result's chunks are 128 KiB and still go to the
/// pool, all but its last.
const INLINE_SEAL_BYTES: usize = 16 * 1024;

/// The HMAC and the seal of a result in progress.
pub(super) struct Sealing {
    hmac: HmacStream,
    seal: SealStream,
    /// Time spent sealing so far.
    took: Duration,
}

/// A chunk of plaintext, sealed up to `sealed`, and the part its text went into.
pub(super) struct Sealed {
    pub sealing: Sealing,
    pub chunk: Vec<u8>,
    pub sealed: usize,
    pub part: PartBuffer,
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

    /// Seals `chunk` from `from` on, as much of it as `part` has room for (all of it, when the
    /// part is not filled by it), its text appended to `part` in place: no copy of the text is
    /// made on its way to the store. Returns how far the chunk is sealed.
    pub async fn update(
        self,
        chunk: Vec<u8>,
        from: usize,
        mut part: PartBuffer,
    ) -> Result<Sealed, SealingError> {
        let Sealing {
            mut hmac,
            mut seal,
            took,
        } = self;
        let started = Instant::now();
        let inline = chunk.len().saturating_sub(from) <= INLINE_SEAL_BYTES;
        let work = move || {
            let rest = chunk.get(from..).unwrap_or_default();
            // The part is filled exactly, so it goes as it is; only a room too small for the
            // nonce's text (a part of under 16 bytes, never a real one) takes the rest whole,
            // the upload moving what passes its end.
            let take = match seal.fits(part.room()) {
                0 => rest.len(),
                fits => fits.min(rest.len()),
            };
            let piece = &rest[..take];
            hmac.update(piece);
            let sealed = seal.update(piece, part.buffer());
            let end = from + take;
            sealed.map(|()| (hmac, seal, chunk, end, part))
        };
        let sealed = if inline {
            work()
        } else {
            tokio::task::spawn_blocking(work)
                .await
                .map_err(|e| SealingError::Interrupted(e.to_string()))?
        };
        let (hmac, seal, chunk, sealed, part) = sealed.map_err(|_| SealingError::TooLong)?;
        Ok(Sealed {
            sealing: Sealing {
                hmac,
                seal,
                took: took + started.elapsed(),
            },
            chunk,
            sealed,
            part,
        })
    }

    /// Ends the seal: the plaintext's HMAC (hex), the last of the stored text, and the time
    /// spent sealing.
    pub fn finish(self) -> (String, Vec<u8>, Duration) {
        let mut tail = Vec::new();
        self.seal.finish(&mut tail);
        (self.hmac.finish_hex(), tail, self.took)
    }
}

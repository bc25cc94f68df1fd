//! `Upload`: a stored body written piece by piece as it is produced, in parts of the configured
//! size with a few in flight, published only after the caller's last check.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use aws_sdk_s3::types::CompletedPart;
use bytes::Bytes;
use tokio::task::JoinSet;

use super::checksum::Crc32;
use super::error::{Result, StorageError};
use super::multipart::{AbortOnDrop, SentPart, MAX_PARTS, PARTS_IN_FLIGHT};
use super::part_buffer::PartBuffer;
use super::retry::{retrying, NoRetry, RetryPolicy};
use super::store::ObjectStore;

/// An object being written, started by [`ObjectStore::upload`].
///
/// [`write`](Self::write) takes the body (for a sealed result, the base64 text a
/// `crypto::SealStream` appends) in pieces of any size, copied into the part being filled; or a
/// producer borrows that part with [`lend`](Self::lend), appends to it in place (on any thread)
/// and returns it with [`give_back`](Self::give_back), so the body is written once, where it is
/// sent from. Once more than one part
/// (`part_size_bytes`) has arrived, a multipart upload is started and each full part is sent in
/// the background, at most 3 at a time: memory stays near 4 parts whatever the object's size.
/// [`finish`](Self::finish) runs the caller's check and only then publishes the object
/// (`CompleteMultipartUpload`, or a single `PutObject` for a body of at most one part): a run
/// that fails the check, fails anywhere, or is dropped, never leaves an object behind.
///
/// A request that fails in a way a retry may help (each part, the creation, the completion, the
/// single put) is tried again from the bytes it holds, as the [`RetryPolicy`] given with
/// [`with_retry`](Self::with_retry) says (by default, never).
///
/// Every failure aborts the multipart upload before the error is returned; dropping an `Upload`
/// midway spawns the abort in the background (best effort, like `put_sealed`). After a failure,
/// further calls fail with [`StorageError::UploadAborted`].
pub struct Upload {
    store: ObjectStore,
    key: String,
    part_size: usize,
    /// The part being filled; sent once full and followed by more data, so that a body of
    /// exactly one part stays a single `PutObject`.
    buffer: Vec<u8>,
    /// The CRC32 of `buffer`'s bytes, taken as they arrive (while they are still in the CPU's
    /// cache), sent as the checksum of the part or of the single PutObject.
    crc: Crc32,
    /// Buffers of parts already sent, emptied, for the next parts: an upload allocates at most
    /// one buffer per part in flight plus the one being filled, whatever its number of parts.
    spare: Vec<Vec<u8>>,
    /// Part buffers allocated so far.
    buffers_allocated: usize,
    /// `buffer` is lent out ([`lend`](Self::lend)) and not given back yet.
    lent: bool,
    multipart: Option<Multipart>,
    written: u64,
    failed: bool,
    retry: Arc<dyn RetryPolicy>,
}

/// The parts side of an upload, from the first full part on.
struct Multipart {
    upload_id: String,
    /// Declared before `guard`: fields drop in order, so on a drop the running part requests are
    /// cancelled first and the abort is spawned after them.
    in_flight: JoinSet<Result<SentPart>>,
    guard: AbortOnDrop,
    completed: Vec<CompletedPart>,
    /// Number of the next part to send (the first is 1).
    next_part: i32,
}

impl fmt::Debug for Upload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upload")
            .field("key", &self.key)
            .field("written", &self.written)
            .field("upload_id", &self.upload_id())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl ObjectStore {
    /// Starts writing the object `key`. Nothing is sent until a part is full or
    /// [`Upload::finish`] is called.
    pub fn upload(&self, key: &str) -> Upload {
        let part_size = self.config().part_size_bytes;
        Upload {
            store: self.clone(),
            key: key.to_owned(),
            part_size,
            buffer: Vec::with_capacity(part_size),
            crc: Crc32::default(),
            spare: Vec::new(),
            buffers_allocated: 1,
            lent: false,
            multipart: None,
            written: 0,
            failed: false,
            retry: Arc::new(NoRetry),
        }
    }
}

impl Upload {
    /// Tries failed requests again as `retry` says.
    pub fn with_retry(mut self, retry: Arc<dyn RetryPolicy>) -> Self {
        self.retry = retry;
        self
    }

    /// The object's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Part buffers allocated so far (for tests): at most [`PARTS_IN_FLIGHT`] + 1 while each
    /// sent part's buffer is reused, whatever the number of parts.
    pub fn part_buffers_allocated(&self) -> usize {
        self.buffers_allocated
    }

    /// The multipart upload's id, once one was started (for logs and tests).
    pub fn upload_id(&self) -> Option<&str> {
        self.multipart
            .as_ref()
            .map(|multipart| multipart.upload_id.as_str())
    }

    /// Appends `bytes` to the body, sending every part that fills up and is followed by more.
    ///
    /// Waits when 3 parts are already in flight. On failure the upload is aborted first.
    pub async fn write(&mut self, mut bytes: &[u8]) -> Result<()> {
        self.usable()?;
        while !bytes.is_empty() {
            if self.buffer.len() == self.part_size {
                self.send_full_part().await?;
            }
            let take = (self.part_size - self.buffer.len()).min(bytes.len());
            self.buffer.extend_from_slice(&bytes[..take]);
            self.crc.update(&bytes[..take]);
            self.written += take as u64;
            bytes = &bytes[take..];
        }
        Ok(())
    }

    /// Lends the part being filled, for the next bytes of the body to be appended to it in
    /// place; [`give_back`](Self::give_back) takes it back. A full part is sent first (data
    /// follows it), so the part lent always has room.
    ///
    /// Until it is given back, the upload takes nothing else: [`write`](Self::write) and
    /// [`finish`](Self::finish) fail with [`StorageError::PartLent`]. On failure the upload is
    /// aborted first.
    pub async fn lend(&mut self) -> Result<PartBuffer> {
        self.usable()?;
        if self.buffer.len() >= self.part_size {
            self.send_full_part().await?;
        }
        self.lent = true;
        Ok(PartBuffer::lent(
            std::mem::take(&mut self.buffer),
            self.part_size,
        ))
    }

    /// Takes back the part [`lend`](Self::lend) lent, with the bytes appended to it: they are
    /// the body's next bytes. Bytes past the part's end go to the next part (a copy). A buffer
    /// given back when none is lent ([`PartBuffer::unbounded`]) is written as by
    /// [`write`](Self::write).
    pub async fn give_back(&mut self, part: PartBuffer) -> Result<()> {
        if !self.lent {
            return self.write(part.appended()).await;
        }
        self.lent = false;
        self.usable()?;
        let (mut bytes, start) = part.into_parts();
        let excess = if bytes.len() > self.part_size {
            bytes.split_off(self.part_size)
        } else {
            Vec::new()
        };
        self.written += bytes.len().saturating_sub(start) as u64;
        self.crc.update(bytes.get(start..).unwrap_or_default());
        self.buffer = bytes;
        self.write(&excess).await
    }

    /// Sends what is left, waits for every part, awaits `check` and, if it passes, publishes the
    /// object. Returns the object's length.
    ///
    /// `check` runs after every byte is in the store and right before the object becomes
    /// visible (for the Worker: that the job's claim is still held). Its `Err` text becomes
    /// [`StorageError::Refused`]; it must not carry secrets.
    pub async fn finish(mut self, check: impl Future<Output = Result<(), String>>) -> Result<u64> {
        self.usable()?;
        let outcome = self.publish(check).await;
        if outcome.is_err() {
            Box::pin(self.fail()).await;
        }
        outcome.map(|()| self.written)
    }

    /// Abandons the upload: aborts the multipart upload, if any, and waits for the abort.
    pub async fn abort(mut self) {
        self.fail().await;
    }

    async fn publish(&mut self, check: impl Future<Output = Result<(), String>>) -> Result<()> {
        let threshold = self.store.config().multipart_threshold_bytes as u64;
        if self.multipart.is_none() && self.written <= threshold {
            self.checked(check).await?;
            let body = Bytes::from(std::mem::take(&mut self.buffer));
            let crc32 = std::mem::take(&mut self.crc).value();
            let (store, key) = (&self.store, self.key.as_str());
            return retrying(&self.retry, || store.put_text(key, body.clone(), crc32)).await;
        }
        // Boxed, as the other multipart steps: their requests' futures are kilobytes each, and
        // every upload's futures would carry them inline, moved whole at each step, small
        // results included.
        Box::pin(self.complete_multipart(check)).await
    }

    /// Sends the last part, waits for every part, and completes the multipart upload.
    async fn complete_multipart(
        &mut self,
        check: impl Future<Output = Result<(), String>>,
    ) -> Result<()> {
        // A part is only sent when more data follows it, so the buffer holds the last part (for
        // a body over the threshold but within one part, the only one).
        self.send_part().await?;
        let Some(multipart) = self.multipart.as_mut() else {
            unreachable!("a multipart upload was started above");
        };
        while !multipart.in_flight.is_empty() {
            let sent = self
                .store
                .next_uploaded(&self.key, &mut multipart.in_flight)
                .await?;
            multipart.completed.push(sent.part);
        }
        let mut parts = std::mem::take(&mut multipart.completed);
        parts.sort_by_key(|part| part.part_number());
        let upload_id = multipart.upload_id.clone();
        self.checked(check).await?;
        let (store, key) = (&self.store, self.key.as_str());
        retrying(&self.retry, || {
            store.complete(key, &upload_id, parts.clone())
        })
        .await?;
        if let Some(multipart) = self.multipart.as_mut() {
            multipart.guard.disarm();
        }
        tracing::debug!(
            key = %self.key,
            bytes = self.written,
            part_buffers = self.buffers_allocated,
            "Streamed upload completed."
        );
        Ok(())
    }

    async fn checked(&self, check: impl Future<Output = Result<(), String>>) -> Result<()> {
        check.await.map_err(|reason| StorageError::Refused {
            key: self.key.clone(),
            reason,
        })
    }

    /// Sends the full buffer as the next part; on failure the upload is aborted first. Both
    /// steps boxed: their requests' futures are kilobytes each, and `write`'s and `lend`'s
    /// futures would carry them inline, moved whole at each step, small results included.
    async fn send_full_part(&mut self) -> Result<()> {
        let sent = Box::pin(self.send_part()).await;
        if sent.is_err() {
            Box::pin(self.fail()).await;
        }
        sent
    }

    /// Sends the buffer as the next part, starting the multipart upload first if needed and
    /// waiting for a part to finish when 3 are in flight.
    async fn send_part(&mut self) -> Result<()> {
        if self.multipart.is_none() {
            let (store, key) = (&self.store, self.key.as_str());
            let upload_id = retrying(&self.retry, || store.create_upload(key)).await?;
            tracing::debug!(key = %self.key, "Streamed multipart upload started.");
            self.multipart = Some(Multipart {
                guard: self.store.abort_on_drop(&self.key, &upload_id),
                upload_id,
                in_flight: JoinSet::new(),
                completed: Vec::new(),
                next_part: 1,
            });
        }
        let Some(multipart) = self.multipart.as_mut() else {
            unreachable!("a multipart upload was started above");
        };
        if u64::try_from(multipart.next_part).unwrap_or(u64::MAX) > MAX_PARTS {
            return Err(StorageError::ObjectTooLarge {
                key: self.key.clone(),
                text_bytes: self.written,
                parts: MAX_PARTS + 1,
                max_parts: MAX_PARTS,
            });
        }
        if multipart.in_flight.len() >= PARTS_IN_FLIGHT {
            let sent = self
                .store
                .next_uploaded(&self.key, &mut multipart.in_flight)
                .await?;
            let part = sent.recycle(&mut self.spare, self.part_size);
            multipart.completed.push(part);
        }
        let next = self.spare.pop().unwrap_or_else(|| {
            self.buffers_allocated += 1;
            Vec::with_capacity(self.part_size)
        });
        let body = std::mem::replace(&mut self.buffer, next);
        let crc32 = std::mem::take(&mut self.crc).value();
        self.store.spawn_part(
            &mut multipart.in_flight,
            (&self.key, &multipart.upload_id),
            (multipart.next_part, crc32),
            Bytes::from(body),
            &self.retry,
        );
        multipart.next_part += 1;
        Ok(())
    }

    /// Stops the part requests still running, then aborts the upload and waits for the abort.
    async fn fail(&mut self) {
        self.failed = true;
        self.lent = false;
        self.buffer = Vec::new();
        self.crc = Crc32::default();
        self.spare = Vec::new();
        if let Some(multipart) = self.multipart.as_mut() {
            multipart.in_flight.shutdown().await;
            multipart.guard.abort_now().await;
        }
    }

    fn usable(&self) -> Result<()> {
        if self.failed {
            return Err(StorageError::UploadAborted {
                key: self.key.clone(),
            });
        }
        if self.lent {
            return Err(StorageError::PartLent {
                key: self.key.clone(),
            });
        }
        Ok(())
    }
}

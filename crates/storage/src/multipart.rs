//! The multipart requests an [`Upload`](crate::Upload) is made of: create, parts (each tried
//! again as the upload's policy says), complete, and the abort of an upload left unfinished.

use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{ChecksumAlgorithm, CompletedMultipartUpload, CompletedPart};
use aws_sdk_s3::Client;
use bytes::Bytes;
use std::sync::Arc;
use tokio::task::JoinSet;

use super::checksum;
use super::error::{Result, StorageError};
use super::retry::{retrying, RetryPolicy};
use super::store::{ObjectStore, CONTENT_TYPE};

/// Most parts S3 accepts in one multipart upload.
pub(super) const MAX_PARTS: u64 = 10_000;
/// Parts uploaded at once. Each holds one part's base64 text in memory, so this and the part
/// being filled bound the memory of an upload.
pub(super) const PARTS_IN_FLIGHT: usize = 3;

impl ObjectStore {
    /// Starts a multipart upload and returns its id.
    pub(super) async fn create_upload(&self, key: &str) -> Result<String> {
        let created = self
            .client
            .create_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .content_type(CONTENT_TYPE)
            .send()
            .await
            .map_err(|error| StorageError::CreateMultipart {
                key: key.to_owned(),
                cause: self.scrubber.sdk(&error),
            })?;
        created
            .upload_id()
            .map(str::to_owned)
            .ok_or_else(|| StorageError::CreateMultipart {
                key: key.to_owned(),
                cause: self
                    .scrubber
                    .other(&"the response carries no upload id", false),
            })
    }

    /// A guard that aborts the upload `upload_id` unless disarmed.
    pub(super) fn abort_on_drop(&self, key: &str, upload_id: &str) -> AbortOnDrop {
        AbortOnDrop {
            client: self.client.clone(),
            bucket: self.bucket.clone(),
            key: key.to_owned(),
            upload_id: Some(upload_id.to_owned()),
        }
    }

    /// Sends part `part_number` in the background, tried again as `retry` says;
    /// [`next_uploaded`](Self::next_uploaded) collects it, with its body for reuse.
    pub(super) fn spawn_part(
        &self,
        in_flight: &mut JoinSet<Result<SentPart>>,
        upload: (&str, &str),
        (part_number, crc32): (i32, u32),
        text: Bytes,
        retry: &Arc<dyn RetryPolicy>,
    ) {
        let (store, retry) = (self.clone(), retry.clone());
        let (key, upload_id) = (upload.0.to_owned(), upload.1.to_owned());
        in_flight.spawn(async move {
            let part = retrying(&retry, || {
                store.upload_part(&key, &upload_id, (part_number, crc32), text.clone())
            })
            .await?;
            Ok(SentPart { part, body: text })
        });
    }

    async fn upload_part(
        &self,
        key: &str,
        upload_id: &str,
        (part_number, crc32): (i32, u32),
        text: Bytes,
    ) -> Result<CompletedPart> {
        let request = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(upload_id)
            .part_number(part_number)
            // The part's CRC32, taken as its bytes arrived: given, the SDK sends it as it is
            // instead of reading the whole part again to compute it.
            .checksum_algorithm(ChecksumAlgorithm::Crc32)
            .checksum_crc32(checksum::header(crc32))
            .body(ByteStream::from(text))
            .customize();
        // The payload's SHA-256 only with `sign_payload` (see `StorageConfig::sign_payload`).
        let request = if self.config().sign_payload {
            request
        } else {
            request.disable_payload_signing()
        };
        let output = request
            .send()
            .await
            .map_err(|error| StorageError::UploadPart {
                key: key.to_owned(),
                part_number,
                cause: self.scrubber.sdk(&error),
            })?;
        let Some(e_tag) = output.e_tag() else {
            return Err(StorageError::UploadPart {
                key: key.to_owned(),
                part_number,
                cause: self.scrubber.other(&"the response carries no ETag", false),
            });
        };
        // Part checksums are not repeated in CompleteMultipartUpload because the upload was
        // created without a checksum algorithm.
        Ok(CompletedPart::builder()
            .part_number(part_number)
            .e_tag(e_tag)
            .build())
    }

    /// The next part sent (or failed) of those in flight.
    pub(super) async fn next_uploaded(
        &self,
        key: &str,
        in_flight: &mut JoinSet<Result<SentPart>>,
    ) -> Result<SentPart> {
        match in_flight.join_next().await {
            Some(Ok(sent)) => sent,
            Some(Err(join_error)) => Err(StorageError::UploadPart {
                key: key.to_owned(),
                part_number: 0,
                cause: self.scrubber.other(&join_error, false),
            }),
            None => Err(StorageError::UploadPart {
                key: key.to_owned(),
                part_number: 0,
                cause: self.scrubber.other(&"no part upload was running", false),
            }),
        }
    }

    pub(super) async fn complete(
        &self,
        key: &str,
        upload_id: &str,
        parts: Vec<CompletedPart>,
    ) -> Result<()> {
        self.client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(upload_id)
            .multipart_upload(
                CompletedMultipartUpload::builder()
                    .set_parts(Some(parts))
                    .build(),
            )
            .send()
            .await
            .map_err(|error| StorageError::CompleteMultipart {
                key: key.to_owned(),
                cause: self.scrubber.sdk(&error),
            })?;
        Ok(())
    }
}

/// A part the store accepted, and the body it was sent from, free again once the request is
/// done.
pub(super) struct SentPart {
    pub(super) part: CompletedPart,
    pub(super) body: Bytes,
}

impl SentPart {
    /// The part, its body's buffer emptied into `spare` when nothing else holds it and it holds
    /// a whole part: the next part is filled there instead of in a fresh allocation.
    pub(super) fn recycle(self, spare: &mut Vec<Vec<u8>>, part_size: usize) -> CompletedPart {
        if let Ok(mut body) = self.body.try_into_mut() {
            // Emptied first: the conversion then moves no byte.
            body.clear();
            let buffer = Vec::from(body);
            if buffer.capacity() >= part_size {
                spare.push(buffer);
            }
        }
        self.part
    }
}

/// Aborts a multipart upload that neither completed nor was aborted explicitly, so a dropped
/// `put_sealed` leaves no parts behind (best effort: the abort runs in the background).
pub(super) struct AbortOnDrop {
    client: Client,
    bucket: String,
    key: String,
    upload_id: Option<String>,
}

impl AbortOnDrop {
    pub(super) fn disarm(&mut self) {
        self.upload_id = None;
    }

    /// Aborts now and waits; a failure is logged, not returned: the caller is already reporting
    /// the error that made it abort.
    pub(super) async fn abort_now(&mut self) {
        if let Some(upload_id) = self.upload_id.take() {
            abort_upload(&self.client, &self.bucket, &self.key, &upload_id).await;
        }
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        let Some(upload_id) = self.upload_id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(key = %self.key, "Multipart upload left open: no runtime to abort it.");
            return;
        };
        let (client, bucket, key) = (self.client.clone(), self.bucket.clone(), self.key.clone());
        runtime.spawn(async move { abort_upload(&client, &bucket, &key, &upload_id).await });
    }
}

async fn abort_upload(client: &Client, bucket: &str, key: &str, upload_id: &str) {
    let aborted = client
        .abort_multipart_upload()
        .bucket(bucket)
        .key(key)
        .upload_id(upload_id)
        .send()
        .await;
    match aborted {
        Ok(_) => tracing::debug!(key, "Multipart upload aborted."),
        // Only the error code: the full text may name the endpoint, and this path has no
        // scrubber. A bucket lifecycle rule for incomplete uploads is the backstop.
        Err(error) => tracing::warn!(
            key,
            error.code = error.as_service_error().and_then(ProvideErrorMetadata::code),
            "Failed to abort a multipart upload; its parts stay until a lifecycle rule removes them."
        ),
    }
}

/// Length of the standard padded base64 text of `raw_len` bytes.
#[cfg(test)]
fn base64_len(raw_len: usize) -> u64 {
    raw_len.div_ceil(3) as u64 * 4
}

/// Raw bytes per part for a part of at most `part_size_bytes` of text: whole base64 quanta
/// (3 raw bytes → 4 text bytes), so no part but the last ends in padding.
pub(super) fn raw_part_len(part_size_bytes: usize) -> usize {
    (part_size_bytes / 4).max(1) * 3
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;

    use super::*;

    #[test]
    fn parts_hold_whole_base64_quanta_within_the_part_size() {
        for part_size in [5 * 1024 * 1024, 8 * 1024 * 1024, 5 * 1024 * 1024 + 3, 4, 7] {
            let raw = raw_part_len(part_size);
            assert_eq!(raw % 3, 0, "{part_size}");
            let text = base64_len(raw) as usize;
            assert!(text <= part_size, "{part_size}: {text}");
            assert!(part_size - text < 4, "{part_size}: {text}");
        }
    }

    #[test]
    fn part_texts_concatenate_into_the_whole_text() {
        let raw: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 3) as u8).collect();
        for len in [0, 1, 2, 3, 4, 299, 300, 301, 302, 1000] {
            let whole = STANDARD.encode(&raw[..len]);
            let joined: String = raw[..len]
                .chunks(raw_part_len(100))
                .map(|chunk| STANDARD.encode(chunk))
                .collect();
            assert_eq!(joined, whole, "{len}");
            assert_eq!(base64_len(len), whole.len() as u64);
        }
    }
}

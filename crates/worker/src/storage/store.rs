//! `ObjectStore`: the Worker's S3 client, storing sealed results as base64 text (contract §2, §7).

use std::fmt;
use std::time::{Duration, Instant};

use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLocationConstraint, CompletedMultipartUpload, CompletedPart, CreateBucketConfiguration,
};
use aws_sdk_s3::Client;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use secrecy::ExposeSecret as _;
use tokio::task::JoinSet;

use super::config::{StorageConfig, DEFAULT_REGION};
use super::error::{Result, Scrubber, StorageError};

/// Content type of every stored result (contract §2).
pub const CONTENT_TYPE: &str = "application/octet-stream";
/// Most parts S3 accepts in one multipart upload.
pub const MAX_PARTS: u64 = 10_000;
/// Parts uploaded at once. Each holds one part's base64 text in memory, so this bounds the
/// memory of an upload to the sealed bytes plus this many parts.
const PARTS_IN_FLIGHT: usize = 3;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_ATTEMPTS: u32 = 3;

/// Stores, reads, checks and deletes sealed results in one bucket.
///
/// Cheap to clone (the SDK client is reference-counted). `Debug` shows no credential.
#[derive(Clone)]
pub struct ObjectStore {
    client: Client,
    bucket: String,
    config: StorageConfig,
    /// Raw sealed bytes per multipart part: a multiple of 3, so that the base64 texts of the
    /// parts concatenate into the base64 text of the whole.
    raw_part_len: usize,
    scrubber: Scrubber,
}

impl ObjectStore {
    /// Builds the S3 client from `config` (checked with [`StorageConfig::validate`]).
    ///
    /// The SDK configuration is explicit: region (empty → `us-east-1`), the endpoint when given,
    /// path style, static credentials when given or else the default provider chain; connect
    /// timeout 5 s, 60 s per attempt; standard retries, 3 attempts. No request is sent: a store
    /// can be built while S3 is down ([`head_bucket`](Self::head_bucket) checks readiness).
    /// Async only because the default credentials chain resolves its sources once.
    pub async fn new(config: StorageConfig) -> Result<Self> {
        config.validate()?;
        let region = Region::new(config.effective_region().to_owned());
        let mut builder = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(region.clone())
            .force_path_style(config.use_path_style)
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                    .build(),
            )
            .retry_config(RetryConfig::standard().with_max_attempts(MAX_ATTEMPTS));
        if let Some(endpoint) = &config.endpoint {
            builder = builder.endpoint_url(endpoint);
        }
        builder = match &config.credentials {
            Some(credentials) => builder.credentials_provider(Credentials::new(
                credentials.access_key_id.clone(),
                credentials.secret_access_key.expose_secret().to_owned(),
                None,
                None,
                "fetcher-static",
            )),
            None => builder.credentials_provider(
                DefaultCredentialsChain::builder()
                    .region(region)
                    .build()
                    .await,
            ),
        };
        // `from_conf` panics only without a behavior version (set above) or without a sleep
        // implementation for the timeouts and retries, which the `rt-tokio` feature of
        // aws-sdk-s3 (enabled in Cargo.toml) provides by default.
        let client = Client::from_conf(builder.build());

        let secrets: Vec<&str> = config
            .credentials
            .iter()
            .flat_map(|credentials| {
                [
                    credentials.access_key_id.as_str(),
                    credentials.secret_access_key.expose_secret(),
                ]
            })
            .collect();
        let scrubber = Scrubber::new(config.endpoint.as_deref(), &secrets);
        Ok(Self {
            client,
            bucket: config.bucket.clone(),
            raw_part_len: raw_part_len(config.part_size_bytes),
            config,
            scrubber,
        })
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    pub fn config(&self) -> &StorageConfig {
        &self.config
    }

    /// Stores a sealed result under `key` and returns the number of bytes stored.
    ///
    /// The body is the standard padded base64 text of `sealed_raw` (`nonce || ciphertext ||
    /// tag`, as `crypto::CipherKey::seal_raw` returns it), content type
    /// `application/octet-stream`. A text up to `multipart_threshold_bytes` goes up in one
    /// PutObject. A longer one goes up in parts, each encoded from the raw bytes just before it
    /// is sent, at most 3 at a time: memory stays near `sealed_raw` plus 3 parts, and the whole
    /// text is never built. A failed multipart upload is aborted before the error is returned;
    /// if this future is dropped midway, the abort is spawned in the background.
    pub async fn put_sealed(&self, key: &str, sealed_raw: Vec<u8>) -> Result<u64> {
        let text_len = base64_len(sealed_raw.len());
        if text_len <= self.config.multipart_threshold_bytes as u64 {
            self.put_single(key, &sealed_raw).await?;
        } else {
            self.put_multipart(key, &sealed_raw, text_len).await?;
        }
        Ok(text_len)
    }

    async fn put_single(&self, key: &str, sealed_raw: &[u8]) -> Result<()> {
        let text = STANDARD.encode(sealed_raw).into_bytes();
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(CONTENT_TYPE)
            .body(ByteStream::from(text))
            .send()
            .await
            .map_err(|error| StorageError::Put {
                key: key.to_owned(),
                cause: self.scrubber.sdk(&error),
            })?;
        Ok(())
    }

    async fn put_multipart(&self, key: &str, sealed_raw: &[u8], text_len: u64) -> Result<()> {
        let parts = sealed_raw.len().div_ceil(self.raw_part_len) as u64;
        if parts > MAX_PARTS {
            return Err(StorageError::ObjectTooLarge {
                key: key.to_owned(),
                text_bytes: text_len,
                parts,
                max_parts: MAX_PARTS,
            });
        }
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
        let Some(upload_id) = created.upload_id().map(str::to_owned) else {
            return Err(StorageError::CreateMultipart {
                key: key.to_owned(),
                cause: self
                    .scrubber
                    .other(&"the response carries no upload id", false),
            });
        };
        tracing::debug!(
            key,
            parts,
            text_bytes = text_len,
            "Multipart upload started."
        );

        let mut guard = AbortOnDrop {
            client: self.client.clone(),
            bucket: self.bucket.clone(),
            key: key.to_owned(),
            upload_id: Some(upload_id.clone()),
        };
        let outcome = async {
            let parts = self.upload_parts(key, &upload_id, sealed_raw).await?;
            self.complete(key, &upload_id, parts).await
        }
        .await;
        match outcome {
            Ok(()) => {
                guard.disarm();
                tracing::debug!(key, parts, "Multipart upload completed.");
                Ok(())
            }
            Err(error) => {
                guard.abort_now().await;
                Err(error)
            }
        }
    }

    /// Uploads every part and returns them in part order.
    async fn upload_parts(
        &self,
        key: &str,
        upload_id: &str,
        sealed_raw: &[u8],
    ) -> Result<Vec<CompletedPart>> {
        let mut completed = Vec::with_capacity(sealed_raw.len().div_ceil(self.raw_part_len));
        // Dropping the set (on an early return) aborts the uploads still running.
        let mut in_flight = JoinSet::new();
        for (index, chunk) in sealed_raw.chunks(self.raw_part_len).enumerate() {
            if in_flight.len() >= PARTS_IN_FLIGHT {
                completed.push(self.next_uploaded(key, &mut in_flight).await?);
            }
            // At most `MAX_PARTS` (10 000) parts, checked by the caller: the number fits.
            let part_number = i32::try_from(index + 1).unwrap_or(i32::MAX);
            // Encoded only now, so at most `PARTS_IN_FLIGHT` part texts exist at once.
            let text = STANDARD.encode(chunk).into_bytes();
            let request = self
                .client
                .upload_part()
                .bucket(&self.bucket)
                .key(key)
                .upload_id(upload_id)
                .part_number(part_number)
                .body(ByteStream::from(text));
            in_flight.spawn(async move { (part_number, request.send().await) });
        }
        while !in_flight.is_empty() {
            completed.push(self.next_uploaded(key, &mut in_flight).await?);
        }
        completed.sort_by_key(|part| part.part_number());
        Ok(completed)
    }

    async fn next_uploaded(
        &self,
        key: &str,
        in_flight: &mut JoinSet<UploadPartResult>,
    ) -> Result<CompletedPart> {
        let joined = in_flight.join_next().await;
        let (part_number, sent) = match joined {
            Some(Ok(done)) => done,
            Some(Err(join_error)) => {
                return Err(StorageError::UploadPart {
                    key: key.to_owned(),
                    part_number: 0,
                    cause: self.scrubber.other(&join_error, false),
                })
            }
            None => {
                return Err(StorageError::UploadPart {
                    key: key.to_owned(),
                    part_number: 0,
                    cause: self.scrubber.other(&"no part upload was running", false),
                })
            }
        };
        let output = sent.map_err(|error| StorageError::UploadPart {
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
        // Part checksums are left to the SDK (it adds CRC32 per part); they are not repeated in
        // CompleteMultipartUpload because the upload was created without a checksum algorithm.
        Ok(CompletedPart::builder()
            .part_number(part_number)
            .e_tag(e_tag)
            .build())
    }

    async fn complete(&self, key: &str, upload_id: &str, parts: Vec<CompletedPart>) -> Result<()> {
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

    /// Reads the stored body (the base64 text of a sealed blob) as bytes.
    pub async fn get(&self, key: &str) -> Result<Vec<u8>> {
        let output = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .map_err(|error| {
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_no_such_key())
                {
                    StorageError::NotFound {
                        key: key.to_owned(),
                    }
                } else {
                    StorageError::Get {
                        key: key.to_owned(),
                        cause: self.scrubber.sdk(&error),
                    }
                }
            })?;
        let body = output
            .body
            .collect()
            .await
            .map_err(|error| StorageError::Get {
                key: key.to_owned(),
                cause: self.scrubber.other(&error, true),
            })?;
        Ok(body.to_vec())
    }

    /// Deletes the object under `key`. Deleting a missing object succeeds: the pipeline calls
    /// this to make sure a failed job leaves no stored result, whatever state it reached.
    pub async fn delete(&self, key: &str) -> Result<()> {
        match self
            .client
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            // S3 answers 204 for a missing key; some compatible servers answer NoSuchKey.
            Err(error)
                if error
                    .as_service_error()
                    .and_then(ProvideErrorMetadata::code)
                    == Some("NoSuchKey") =>
            {
                Ok(())
            }
            Err(error) => Err(StorageError::Delete {
                key: key.to_owned(),
                cause: self.scrubber.sdk(&error),
            }),
        }
    }

    /// Whether an object is stored under `key` (HeadObject).
    pub async fn exists(&self, key: &str) -> Result<bool> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_not_found()) =>
            {
                Ok(false)
            }
            Err(error) => Err(StorageError::HeadObject {
                key: key.to_owned(),
                cause: self.scrubber.sdk(&error),
            }),
        }
    }

    /// Readiness check: HeadBucket on the configured bucket. Returns the round-trip latency,
    /// retries included. A missing bucket is [`StorageError::BucketNotFound`].
    pub async fn head_bucket(&self) -> Result<Duration> {
        let started = Instant::now();
        match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => Ok(started.elapsed()),
            Err(error)
                if error
                    .as_service_error()
                    .is_some_and(|service| service.is_not_found()) =>
            {
                Err(StorageError::BucketNotFound {
                    bucket: self.bucket.clone(),
                })
            }
            Err(error) => Err(StorageError::HeadBucket {
                bucket: self.bucket.clone(),
                cause: self.scrubber.sdk(&error),
            }),
        }
    }

    /// Creates the configured bucket unless it exists (for tests and the demo; production
    /// buckets are provisioned by the operator).
    pub async fn create_bucket_if_missing(&self) -> Result<()> {
        match self.head_bucket().await {
            Ok(_) => return Ok(()),
            Err(StorageError::BucketNotFound { .. }) => {}
            Err(error) => return Err(error),
        }
        let mut request = self.client.create_bucket().bucket(&self.bucket);
        let region = self.config.effective_region();
        // us-east-1 is S3's default location and must not be named as a constraint.
        if region != DEFAULT_REGION {
            request = request.create_bucket_configuration(
                CreateBucketConfiguration::builder()
                    .location_constraint(BucketLocationConstraint::from(region))
                    .build(),
            );
        }
        match request.send().await {
            Ok(_) => Ok(()),
            Err(error)
                if error.as_service_error().is_some_and(|service| {
                    service.is_bucket_already_owned_by_you() || service.is_bucket_already_exists()
                }) =>
            {
                Ok(())
            }
            Err(error) => Err(StorageError::CreateBucket {
                bucket: self.bucket.clone(),
                cause: self.scrubber.sdk(&error),
            }),
        }
    }
}

impl fmt::Debug for ObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Not the SDK client: its configuration would print the access key id.
        f.debug_struct("ObjectStore")
            .field("bucket", &self.bucket)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

type UploadPartResult = (
    i32,
    std::result::Result<
        aws_sdk_s3::operation::upload_part::UploadPartOutput,
        aws_sdk_s3::error::SdkError<aws_sdk_s3::operation::upload_part::UploadPartError>,
    >,
);

/// Aborts a multipart upload that neither completed nor was aborted explicitly, so a dropped
/// `put_sealed` leaves no parts behind (best effort: the abort runs in the background).
struct AbortOnDrop {
    client: Client,
    bucket: String,
    key: String,
    upload_id: Option<String>,
}

impl AbortOnDrop {
    fn disarm(&mut self) {
        self.upload_id = None;
    }

    /// Aborts now and waits; a failure is logged, not returned: the caller is already reporting
    /// the error that made it abort.
    async fn abort_now(&mut self) {
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
fn base64_len(raw_len: usize) -> u64 {
    raw_len.div_ceil(3) as u64 * 4
}

/// Raw bytes per part for a part of at most `part_size_bytes` of text: whole base64 quanta
/// (3 raw bytes → 4 text bytes), so no part but the last ends in padding.
fn raw_part_len(part_size_bytes: usize) -> usize {
    (part_size_bytes / 4).max(1) * 3
}

#[cfg(test)]
mod tests {
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

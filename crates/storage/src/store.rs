//! `ObjectStore`: the Worker's S3 client, storing sealed results as base64 text (contract §2, §7).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_config::default_provider::credentials::DefaultCredentialsChain;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region, SharedCredentialsProvider};
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketLocationConstraint, ChecksumAlgorithm, CreateBucketConfiguration};
use aws_sdk_s3::Client;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use bytes::Bytes;
use secrecy::ExposeSecret as _;

use super::checksum;
use super::config::{StorageConfig, DEFAULT_REGION};
use super::direct_put::DirectPut;
use super::error::{Result, StorageError};
use super::multipart::raw_part_len;
use super::scrubber::Scrubber;

/// Content type of every stored result (contract §2).
pub const CONTENT_TYPE: &str = "application/octet-stream";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_ATTEMPTS: u32 = 3;

/// Stores, reads, checks and deletes sealed results in one bucket.
///
/// Cheap to clone (the SDK client is reference-counted). `Debug` shows no credential.
#[derive(Clone)]
pub struct ObjectStore {
    pub(super) client: Client,
    pub(super) bucket: String,
    config: StorageConfig,
    /// Raw sealed bytes per multipart part: a multiple of 3, so that the base64 texts of the
    /// parts concatenate into the base64 text of the whole.
    pub(super) raw_part_len: usize,
    pub(super) scrubber: Scrubber,
    /// The single PutObject without the SDK's orchestrator, where the endpoint rules allow it.
    direct: Option<Arc<DirectPut>>,
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
        let static_credentials = config.credentials.as_ref().map(|credentials| {
            Credentials::new(
                credentials.access_key_id.clone(),
                credentials.secret_access_key.expose_secret().to_owned(),
                None,
                None,
                "fetcher-static",
            )
        });
        let provider = match &static_credentials {
            Some(credentials) => SharedCredentialsProvider::new(credentials.clone()),
            None => SharedCredentialsProvider::new(
                DefaultCredentialsChain::builder()
                    .region(region)
                    .build()
                    .await,
            ),
        };
        builder = builder.credentials_provider(provider.clone());
        let direct = DirectPut::new(
            &config,
            static_credentials,
            Some(provider),
            CONNECT_TIMEOUT,
            ATTEMPT_TIMEOUT,
        )
        .await
        .map(Arc::new)
        .inspect_err(|reason| {
            tracing::debug!(
                reason,
                "A result of one part goes up through the SDK's PutObject."
            );
        })
        .ok();
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
            direct,
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
    /// `application/octet-stream`, written through an [`Upload`](crate::Upload): a text up to
    /// `multipart_threshold_bytes` (and one part) goes up in one PutObject, a longer one in
    /// parts, each encoded from the raw bytes just before it is written, at most 3 in flight:
    /// memory stays near `sealed_raw` plus 4 parts, and the whole text is never built. A failed
    /// upload is aborted before the error is returned; if this future is dropped midway, the
    /// abort is spawned in the background.
    pub async fn put_sealed(&self, key: &str, sealed_raw: impl AsRef<[u8]>) -> Result<u64> {
        let mut upload = self.upload(key);
        for chunk in sealed_raw.as_ref().chunks(self.raw_part_len) {
            // Whole base64 quanta per chunk: the chunks' texts concatenate into the whole text.
            upload.write(STANDARD.encode(chunk).as_bytes()).await?;
        }
        upload.finish(async { Ok(()) }).await
    }

    /// One PutObject of text that is already the stored body, with `crc32`, its CRC32 as the
    /// upload took it ([`checksum`](super::checksum)); its payload is signed only with
    /// [`StorageConfig::sign_payload`]. Sent directly ([`DirectPut`]) where the endpoint rules
    /// allow, through the SDK otherwise.
    pub(super) async fn put_text(&self, key: &str, text: Bytes, crc32: u32) -> Result<()> {
        if let Some(direct) = &self.direct {
            return direct
                .put(key, text, crc32, &self.scrubber)
                .await
                .map_err(|cause| StorageError::Put {
                    key: key.to_owned(),
                    cause,
                });
        }
        let request = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(CONTENT_TYPE)
            // Given, the SDK sends it as it is instead of reading the body again for it.
            .checksum_algorithm(ChecksumAlgorithm::Crc32)
            .checksum_crc32(checksum::header(crc32))
            .body(ByteStream::from(text))
            .customize();
        let request = if self.config.sign_payload {
            request
        } else {
            request.disable_payload_signing()
        };
        request.send().await.map_err(|error| StorageError::Put {
            key: key.to_owned(),
            cause: self.scrubber.sdk(&error),
        })?;
        Ok(())
    }

    /// Reads the stored body (the base64 text of a sealed blob) as bytes.
    pub async fn get(&self, key: &str) -> Result<Vec<u8>> {
        let mut body = self.get_stream(key).await?;
        let mut bytes = Vec::with_capacity(
            body.announced_len()
                .and_then(|len| usize::try_from(len).ok())
                .unwrap_or(0),
        );
        while let Some(chunk) = body.next_chunk().await? {
            bytes.extend_from_slice(&chunk);
        }
        Ok(bytes)
    }

    /// Starts reading the stored body under `key` piece by piece, as it arrives: memory does not
    /// grow with the object's size. A missing key is [`StorageError::NotFound`].
    pub async fn get_stream(&self, key: &str) -> Result<ObjectBody> {
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
        Ok(ObjectBody {
            key: key.to_owned(),
            len: output
                .content_length
                .and_then(|len| u64::try_from(len).ok()),
            received: 0,
            body: output.body,
            scrubber: self.scrubber.clone(),
        })
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

/// A stored body being read, from [`ObjectStore::get_stream`].
pub struct ObjectBody {
    key: String,
    len: Option<u64>,
    received: u64,
    body: ByteStream,
    scrubber: Scrubber,
}

impl ObjectBody {
    /// The body's length as the server announced it (`Content-Length`), if it did.
    pub fn announced_len(&self) -> Option<u64> {
        self.len
    }

    /// Bytes read so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The next piece of the body, or `None` at its end.
    ///
    /// # Errors
    ///
    /// [`StorageError::Get`] when the connection fails midway, and [`StorageError::Truncated`]
    /// when the body ends before (or runs past) its announced length.
    pub async fn next_chunk(&mut self) -> Result<Option<bytes::Bytes>> {
        let chunk = self
            .body
            .try_next()
            .await
            .map_err(|error| StorageError::Get {
                key: self.key.clone(),
                cause: self.scrubber.other(&error, true),
            })?;
        match chunk {
            Some(chunk) => {
                self.received += chunk.len() as u64;
                match self.len {
                    Some(len) if self.received > len => Err(self.truncated(len)),
                    _ => Ok(Some(chunk)),
                }
            }
            None => match self.len {
                Some(len) if self.received != len => Err(self.truncated(len)),
                _ => Ok(None),
            },
        }
    }

    fn truncated(&self, expected: u64) -> StorageError {
        StorageError::Truncated {
            key: self.key.clone(),
            expected,
            received: self.received,
        }
    }
}

impl fmt::Debug for ObjectBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectBody")
            .field("key", &self.key)
            .field("len", &self.len)
            .field("received", &self.received)
            .finish_non_exhaustive()
    }
}

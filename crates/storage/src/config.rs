//! Settings of the object store: where the bucket is, how to sign in, and how to split uploads.

use std::fmt;

use secrecy::{ExposeSecret as _, SecretString};

use super::error::{Result, StorageError};

/// Region used when none is configured (contract §7: empty → `us-east-1`).
pub const DEFAULT_REGION: &str = "us-east-1";
/// Smallest part S3 accepts in a multipart upload (except the last part).
pub const MIN_PART_SIZE_BYTES: usize = 5 * 1024 * 1024;
/// Largest part S3 accepts in a multipart upload.
pub const MAX_PART_SIZE_BYTES: usize = 5 * 1024 * 1024 * 1024;
/// Default part size, in bytes of stored (base64) text.
pub const DEFAULT_PART_SIZE_BYTES: usize = 8 * 1024 * 1024;

/// Object storage settings (contract §7). The Worker's configuration module fills it from the
/// `OBJECT_STORAGE_*` variables; this type reads no environment itself.
///
/// `Debug` prints no credential.
#[derive(Clone, Debug)]
pub struct StorageConfig {
    /// Custom endpoint URL (MinIO, s3s, …); `None` uses AWS's endpoint for the region.
    pub endpoint: Option<String>,
    /// Signing region; empty means [`DEFAULT_REGION`].
    pub region: String,
    /// Bucket holding the results (required).
    pub bucket: String,
    /// Prepended to every object key by plain concatenation (contract §7).
    pub key_prefix: String,
    /// Static credentials; `None` uses the SDK's default provider chain (environment, profile,
    /// web identity, container and instance metadata).
    pub credentials: Option<StaticCredentials>,
    /// Path-style addressing (`endpoint/bucket/key`), which most S3-compatible servers need.
    pub use_path_style: bool,
    /// Size of one multipart part, in bytes of stored base64 text. At least
    /// [`MIN_PART_SIZE_BYTES`]; rounded down to a multiple of 4 so that every part ends on a
    /// base64 quantum.
    pub part_size_bytes: usize,
    /// Objects whose stored text is longer than this go up in parts; the others in one request.
    pub multipart_threshold_bytes: usize,
    /// Whether SigV4 signs the body of PutObject and UploadPart (its SHA-256 in
    /// `x-amz-content-sha256`). Off by default: the body is AES-256-GCM ciphertext whose tag and
    /// HMAC already catch any change, so the digest costs CPU and adds nothing; the request is
    /// still signed and carries its CRC32 checksum. On for a store that refuses
    /// `UNSIGNED-PAYLOAD`.
    pub sign_payload: bool,
}

impl Default for StorageConfig {
    /// Everything but the bucket, which has no default: [`validate`](Self::validate) rejects an
    /// empty one.
    fn default() -> Self {
        Self {
            endpoint: None,
            region: String::new(),
            bucket: String::new(),
            key_prefix: String::new(),
            credentials: None,
            use_path_style: false,
            part_size_bytes: DEFAULT_PART_SIZE_BYTES,
            multipart_threshold_bytes: DEFAULT_PART_SIZE_BYTES,
            sign_payload: false,
        }
    }
}

impl StorageConfig {
    /// The defaults, for `bucket`.
    pub fn new(bucket: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            ..Self::default()
        }
    }

    /// The signing region, with the contract's default applied.
    pub fn effective_region(&self) -> &str {
        let region = self.region.trim();
        if region.is_empty() {
            DEFAULT_REGION
        } else {
            region
        }
    }

    /// Checks the settings and reports every problem at once; never adjusts a value silently.
    /// No problem text contains a credential or the endpoint.
    pub fn validate(&self) -> Result<()> {
        let mut problems = Vec::new();
        if self.bucket.trim().is_empty() {
            problems.push("the bucket is empty".to_owned());
        }
        if let Some(endpoint) = &self.endpoint {
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                problems.push("the endpoint is not an http:// or https:// URL".to_owned());
            }
        }
        if let Some(credentials) = &self.credentials {
            if credentials.access_key_id.is_empty()
                || credentials.secret_access_key.expose_secret().is_empty()
            {
                problems.push(
                    "the access key id and the secret key must be given both or neither".to_owned(),
                );
            }
        }
        if self.part_size_bytes < MIN_PART_SIZE_BYTES {
            problems.push(format!(
                "the part size ({} bytes) is below S3's minimum of {MIN_PART_SIZE_BYTES} bytes",
                self.part_size_bytes
            ));
        }
        if self.part_size_bytes > MAX_PART_SIZE_BYTES {
            problems.push(format!(
                "the part size ({} bytes) is above S3's maximum of {MAX_PART_SIZE_BYTES} bytes",
                self.part_size_bytes
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(StorageError::InvalidConfig { problems })
        }
    }
}

/// An access key pair. `Debug` shows neither half; the secret is wiped from memory on drop.
#[derive(Clone)]
pub struct StaticCredentials {
    pub access_key_id: String,
    pub secret_access_key: SecretString,
}

impl StaticCredentials {
    pub fn new(access_key_id: impl Into<String>, secret_access_key: impl Into<String>) -> Self {
        Self {
            access_key_id: access_key_id.into(),
            secret_access_key: SecretString::from(secret_access_key.into()),
        }
    }
}

impl fmt::Debug for StaticCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticCredentials")
            .field("access_key_id", &format_args!("<redacted>"))
            .field("secret_access_key", &format_args!("<redacted>"))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> StorageConfig {
        StorageConfig::new("results")
    }

    #[test]
    fn debug_shows_no_credential() {
        let config = StorageConfig {
            credentials: Some(StaticCredentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI")),
            ..valid()
        };
        let printed = format!("{config:?} {config:#?}");
        assert!(!printed.contains("AKIDEXAMPLE"), "{printed}");
        assert!(!printed.contains("wJalrXUtnFEMI"), "{printed}");
        assert!(printed.contains("<redacted>"));
    }

    #[test]
    fn empty_region_means_us_east_1() {
        assert_eq!(valid().effective_region(), "us-east-1");
        let config = StorageConfig {
            region: "eu-west-1".into(),
            ..valid()
        };
        assert_eq!(config.effective_region(), "eu-west-1");
    }

    #[test]
    fn defaults_are_valid_once_a_bucket_is_set() {
        assert!(valid().validate().is_ok());
        assert_eq!(valid().part_size_bytes, 8 * 1024 * 1024);
        assert_eq!(valid().multipart_threshold_bytes, valid().part_size_bytes);
    }

    #[test]
    fn every_problem_is_reported_at_once_without_secrets() {
        let config = StorageConfig {
            endpoint: Some("ftp://storage.internal:21".into()),
            credentials: Some(StaticCredentials::new("", "wJalrXUtnFEMI")),
            part_size_bytes: 1024,
            ..StorageConfig::default()
        };
        let Err(StorageError::InvalidConfig { problems }) = config.validate() else {
            panic!("invalid settings were accepted");
        };
        assert_eq!(problems.len(), 4, "{problems:?}");
        let text = problems.join("; ");
        assert!(!text.contains("wJalrXUtnFEMI"));
        assert!(!text.contains("storage.internal"));
    }
}

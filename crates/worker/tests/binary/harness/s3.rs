//! The S3 test server: `TEST_S3_ENDPOINT`, `TEST_S3_ACCESS_KEY` and `TEST_S3_SECRET_KEY`, as
//! the storage tests read them, defaulting to what `scripts/services.sh s3` provides.

use storage::{StaticCredentials, StorageConfig};

/// The server's settings: endpoint, access key and secret key.
pub struct Server {
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
}

/// The test server's settings, from the environment.
pub fn server() -> Server {
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    Server {
        endpoint: var("TEST_S3_ENDPOINT", "http://127.0.0.1:9000"),
        access_key: var("TEST_S3_ACCESS_KEY", "fetcher"),
        secret_key: var("TEST_S3_SECRET_KEY", "fetcher-secret"),
    }
}

/// A plain SDK client for the test server, to look behind the Worker's back.
pub fn s3_client() -> aws_sdk_s3::Client {
    let server = server();
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(aws_sdk_s3::config::BehaviorVersion::latest())
        .region(aws_sdk_s3::config::Region::new("us-east-1"))
        .endpoint_url(server.endpoint)
        .force_path_style(true)
        .credentials_provider(aws_sdk_s3::config::Credentials::new(
            server.access_key,
            server.secret_key,
            None,
            None,
            "test",
        ))
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// The storage settings of `bucket` on the test server.
pub fn storage_config(bucket: &str) -> StorageConfig {
    let server = server();
    StorageConfig {
        endpoint: Some(server.endpoint),
        credentials: Some(StaticCredentials::new(server.access_key, server.secret_key)),
        use_path_style: true,
        ..StorageConfig::new(bucket)
    }
}

/// Every key of `bucket`, page after page (a listing gives at most 1,000).
pub async fn bucket_keys(bucket: &str) -> Result<Vec<String>, String> {
    let s3 = s3_client();
    let mut keys = Vec::new();
    let mut token = None;
    loop {
        let listed = s3
            .list_objects_v2()
            .bucket(bucket)
            .set_continuation_token(token)
            .send()
            .await
            .map_err(|e| format!("{e:?}"))?;
        keys.extend(
            listed
                .contents()
                .iter()
                .filter_map(|o| o.key().map(str::to_owned)),
        );
        match listed.next_continuation_token() {
            Some(next) if listed.is_truncated() == Some(true) => token = Some(next.to_owned()),
            _ => return Ok(keys),
        }
    }
}

/// A world's bucket, removed with its objects by [`TestBucket::remove`], or from `Drop` when its
/// test panicked first.
pub struct TestBucket {
    pub name: String,
    removed: bool,
}

impl TestBucket {
    pub fn new(name: String) -> TestBucket {
        TestBucket {
            name,
            removed: false,
        }
    }

    /// Removes the bucket and its objects, best effort.
    pub async fn remove(mut self) {
        remove_bucket(&self.name).await;
        self.removed = true;
    }
}

impl Drop for TestBucket {
    fn drop(&mut self) {
        if !self.removed {
            let name = self.name.clone();
            testkit::cleanup::run_detached(move || async move { remove_bucket(&name).await });
        }
    }
}

async fn remove_bucket(bucket: &str) {
    let s3 = s3_client();
    for key in bucket_keys(bucket).await.unwrap_or_default() {
        let _ = s3.delete_object().bucket(bucket).key(key).send().await;
    }
    let _ = s3.delete_bucket().bucket(bucket).send().await;
}

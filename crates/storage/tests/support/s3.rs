//! A fresh bucket per test on the local S3 server (s3s-fs, `scripts/services.sh s3`).
//!
//! Connection details come from `TEST_S3_ENDPOINT`, `TEST_S3_ACCESS_KEY` and
//! `TEST_S3_SECRET_KEY`, defaulting to the script's server. An unreachable server fails the test
//! loudly: storage tests never pass without talking to S3.

// Not every test binary that declares `support` uses every helper.
#![allow(dead_code)]

use std::future::Future;
use std::net::{TcpStream, ToSocketAddrs};
use std::panic;
use std::time::{Duration, Instant};

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::Client;
use storage::{ObjectStore, StaticCredentials, StorageConfig};

pub struct S3Env {
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
}

pub fn env() -> S3Env {
    let var =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    S3Env {
        endpoint: var("TEST_S3_ENDPOINT", "http://127.0.0.1:9000"),
        access_key: var("TEST_S3_ACCESS_KEY", "fetcher"),
        secret_key: var("TEST_S3_SECRET_KEY", "fetcher-secret"),
    }
}

/// A unique, valid bucket name.
pub fn unique_bucket() -> String {
    format!("fetcher-test-{}", uuid::Uuid::new_v4().simple())
}

/// Settings for the test server and `bucket`, with the library's defaults otherwise.
pub fn config(bucket: &str) -> StorageConfig {
    let env = env();
    StorageConfig {
        endpoint: Some(env.endpoint),
        credentials: Some(StaticCredentials::new(env.access_key, env.secret_key)),
        use_path_style: true,
        ..StorageConfig::new(bucket)
    }
}

/// A plain SDK client for the test server, to look behind the store's back.
pub fn raw_client() -> Client {
    let env = env();
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(env.endpoint)
        .force_path_style(true)
        .credentials_provider(Credentials::new(
            env.access_key,
            env.secret_key,
            None,
            None,
            "test",
        ))
        .build();
    Client::from_conf(config)
}

/// What a test gets: the store under test, a raw client, and the bucket's name.
#[derive(Clone)]
pub struct TestBucket {
    pub store: ObjectStore,
    pub client: Client,
    pub name: String,
}

impl TestBucket {
    /// Every key in the bucket, sorted.
    pub async fn keys(&self) -> Vec<String> {
        let listed = self
            .client
            .list_objects_v2()
            .bucket(&self.name)
            .send()
            .await
            .expect("list objects");
        let mut keys: Vec<String> = listed
            .contents()
            .iter()
            .filter_map(|object| object.key().map(str::to_owned))
            .collect();
        keys.sort();
        keys
    }
}

/// Runs `test` against a new bucket (settings adjusted by `customize`), then removes the bucket
/// and its objects, whether the test passed or panicked.
pub async fn with_bucket<F, Fut>(customize: impl FnOnce(&mut StorageConfig), test: F)
where
    F: FnOnce(TestBucket) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    wait_for_server();
    let name = unique_bucket();
    let mut settings = config(&name);
    customize(&mut settings);
    let store = ObjectStore::new(settings)
        .await
        .expect("valid test settings");
    store
        .create_bucket_if_missing()
        .await
        .unwrap_or_else(|error| panic!("cannot create test bucket {name}: {error}"));
    let bucket = TestBucket {
        store,
        client: raw_client(),
        name,
    };
    let outcome = tokio::spawn(test(bucket.clone())).await;
    remove_bucket(&bucket.client, &bucket.name).await;
    if let Err(error) = outcome {
        match error.try_into_panic() {
            Ok(payload) => panic::resume_unwind(payload),
            Err(error) => panic!("test task failed: {error}"),
        }
    }
}

/// Deletes the bucket's objects and open uploads, then the bucket.
pub async fn remove_bucket(client: &Client, bucket: &str) {
    if let Ok(uploads) = client.list_multipart_uploads().bucket(bucket).send().await {
        for upload in uploads.uploads() {
            if let (Some(key), Some(id)) = (upload.key(), upload.upload_id()) {
                let _ = client
                    .abort_multipart_upload()
                    .bucket(bucket)
                    .key(key)
                    .upload_id(id)
                    .send()
                    .await;
            }
        }
    }
    let listed = client
        .list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .expect("list objects for cleanup");
    for object in listed.contents() {
        if let Some(key) = object.key() {
            client
                .delete_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .expect("delete object for cleanup");
        }
    }
    client
        .delete_bucket()
        .bucket(bucket)
        .send()
        .await
        .unwrap_or_else(|error| {
            panic!(
                "cannot remove test bucket {bucket}: {}",
                aws_sdk_s3::error::DisplayErrorContext(&error)
            )
        });
}

/// Waits up to 10 s for the server's port; panics with instructions if it never opens.
fn wait_for_server() {
    let endpoint = env().endpoint;
    let authority = endpoint
        .split_once("://")
        .map_or(endpoint.as_str(), |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut delay = Duration::from_millis(50);
    loop {
        let reachable = authority.to_socket_addrs().ok().is_some_and(|mut addrs| {
            addrs.any(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok())
        });
        if reachable {
            return;
        }
        if Instant::now() >= deadline {
            panic!(
                "S3 server unreachable at {endpoint}: start it with `bash scripts/services.sh s3` \
                 (or point TEST_S3_ENDPOINT at one)"
            );
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_secs(1));
    }
}

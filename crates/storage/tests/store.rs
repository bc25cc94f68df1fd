//! Object storage against a real S3 server (s3s-fs): sealed round trips, multipart, key layout,
//! delete and exists, readiness, and that no error or `Debug` text leaks a credential or address.

mod support;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use crypto::CipherKey;
use storage::{object_key, ObjectStore, StaticCredentials, StorageConfig, StorageError};
use uuid::Uuid;

use support::s3::{self, with_bucket};

const MIB: usize = 1024 * 1024;

fn cipher() -> CipherKey {
    CipherKey::from_bytes([7; 32])
}

/// Deterministic, incompressible-looking plaintext.
fn plaintext(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn no_change(_: &mut StorageConfig) {}

#[tokio::test]
async fn small_object_is_stored_as_base64_text_and_opens_to_the_plaintext() {
    with_bucket(no_change, |bucket| async move {
        let plain = br#"[{"id":1,"amount":"10.00"}]"#.to_vec();
        let sealed = cipher().seal_raw(plain.clone());
        let expected_text = STANDARD.encode(&sealed);
        let key = object_key("", None, Uuid::new_v4()).expect("valid key");

        let stored = bucket
            .store
            .put_sealed(&key.full, sealed)
            .await
            .expect("put");

        assert_eq!(stored, expected_text.len() as u64);
        let body = bucket.store.get(&key.full).await.expect("get");
        assert_eq!(body, expected_text.as_bytes());
        assert_eq!(cipher().open_bytes(&body).expect("opens"), plain);
        let head = bucket
            .client
            .head_object()
            .bucket(&bucket.name)
            .key(&key.full)
            .send()
            .await
            .expect("head object");
        assert_eq!(head.content_type(), Some("application/octet-stream"));
        assert_eq!(head.content_length(), Some(stored as i64));
    })
    .await;
}

#[tokio::test]
async fn empty_result_is_stored_and_opens() {
    with_bucket(no_change, |bucket| async move {
        let sealed = cipher().seal_raw(Vec::new());
        let key = object_key("", None, Uuid::new_v4()).expect("valid key");
        bucket
            .store
            .put_sealed(&key.full, sealed)
            .await
            .expect("put");
        let body = bucket.store.get(&key.full).await.expect("get");
        assert!(cipher().open_bytes(&body).expect("opens").is_empty());
    })
    .await;
}

#[tokio::test]
async fn large_object_goes_up_in_parts_and_round_trips_byte_exactly() {
    let part_size = 5 * MIB;
    let configure = move |config: &mut StorageConfig| {
        config.part_size_bytes = part_size;
        config.multipart_threshold_bytes = part_size;
    };
    with_bucket(configure, move |bucket| async move {
        let plain = plaintext(20 * MIB);
        let sealed = cipher().seal_raw(plain.clone());
        let expected_text = STANDARD.encode(&sealed);
        let key = object_key("big/", Some("tenant-a"), Uuid::new_v4()).expect("valid key");

        let stored = bucket
            .store
            .put_sealed(&key.full, sealed)
            .await
            .expect("multipart put");

        assert_eq!(stored, expected_text.len() as u64);
        let head = bucket
            .client
            .head_object()
            .bucket(&bucket.name)
            .key(&key.full)
            .send()
            .await
            .expect("head object");
        // A multipart object's ETag ends in `-<number of parts>`.
        let parts = expected_text.len().div_ceil(part_size);
        assert!(parts > 1);
        let e_tag = head.e_tag().expect("etag").trim_matches('"').to_owned();
        assert!(e_tag.ends_with(&format!("-{parts}")), "{e_tag}");
        assert_eq!(head.content_type(), Some("application/octet-stream"));

        let body = bucket.store.get(&key.full).await.expect("get");
        assert!(body == expected_text.as_bytes(), "stored text differs");
        assert!(cipher().open_bytes(&body).expect("opens") == plain);
    })
    .await;
}

#[tokio::test]
async fn small_object_above_a_low_threshold_goes_up_as_one_part() {
    let configure = |config: &mut StorageConfig| config.multipart_threshold_bytes = 0;
    with_bucket(configure, |bucket| async move {
        let plain = plaintext(1000);
        let sealed = cipher().seal_raw(plain.clone());
        let key = object_key("", None, Uuid::new_v4()).expect("valid key");
        bucket
            .store
            .put_sealed(&key.full, sealed)
            .await
            .expect("put");
        let head = bucket
            .client
            .head_object()
            .bucket(&bucket.name)
            .key(&key.full)
            .send()
            .await
            .expect("head object");
        assert!(head
            .e_tag()
            .expect("etag")
            .trim_matches('"')
            .ends_with("-1"));
        let body = bucket.store.get(&key.full).await.expect("get");
        assert_eq!(cipher().open_bytes(&body).expect("opens"), plain);
    })
    .await;
}

#[tokio::test]
async fn objects_are_laid_out_by_prefix_tenant_and_job_id() {
    with_bucket(no_change, |bucket| async move {
        let job = Uuid::parse_str("019391A2-7C1E-7A3B-9F00-0123456789AB").expect("uuid");
        let cases = [
            ("", None),
            ("fetcher/", None),
            ("fetcher/", Some("tenant-42")),
            ("", Some("acme")),
        ];
        let mut expected = Vec::new();
        for (prefix, tenant) in cases {
            let key = object_key(prefix, tenant, job).expect("valid key");
            bucket
                .store
                .put_sealed(&key.full, cipher().seal_raw(b"{}".to_vec()))
                .await
                .expect("put");
            assert!(key.full.ends_with(&key.path));
            expected.push(key.full);
        }
        expected.sort();
        assert_eq!(
            bucket.keys().await,
            [
                "acme/external-data/019391a2-7c1e-7a3b-9f00-0123456789ab.json",
                "external-data/019391a2-7c1e-7a3b-9f00-0123456789ab.json",
                "fetcher/external-data/019391a2-7c1e-7a3b-9f00-0123456789ab.json",
                "fetcher/tenant-42/external-data/019391a2-7c1e-7a3b-9f00-0123456789ab.json",
            ]
        );
        assert_eq!(bucket.keys().await, expected);
    })
    .await;
}

#[tokio::test]
async fn exists_tells_stored_from_missing_objects() {
    with_bucket(no_change, |bucket| async move {
        let key = object_key("", Some("t1"), Uuid::new_v4()).expect("valid key");
        assert!(!bucket.store.exists(&key.full).await.expect("exists"));
        bucket
            .store
            .put_sealed(&key.full, cipher().seal_raw(b"x".to_vec()))
            .await
            .expect("put");
        assert!(bucket.store.exists(&key.full).await.expect("exists"));
    })
    .await;
}

#[tokio::test]
async fn delete_removes_the_object_and_is_idempotent() {
    with_bucket(no_change, |bucket| async move {
        let key = object_key("p/", None, Uuid::new_v4()).expect("valid key");
        bucket
            .store
            .put_sealed(&key.full, cipher().seal_raw(b"x".to_vec()))
            .await
            .expect("put");

        bucket.store.delete(&key.full).await.expect("delete");

        assert!(!bucket.store.exists(&key.full).await.expect("exists"));
        assert!(bucket.keys().await.is_empty());
        let missing = bucket
            .store
            .get(&key.full)
            .await
            .expect_err("object is gone");
        assert!(
            matches!(missing, StorageError::NotFound { .. }),
            "{missing}"
        );
        assert!(!missing.is_retriable());
        bucket
            .store
            .delete(&key.full)
            .await
            .expect("deleting a missing object succeeds");
    })
    .await;
}

#[tokio::test]
async fn head_bucket_succeeds_on_an_existing_bucket() {
    with_bucket(no_change, |bucket| async move {
        let latency = bucket.store.head_bucket().await.expect("bucket is ready");
        assert!(latency.as_secs() < 10, "{latency:?}");
    })
    .await;
}

#[tokio::test]
async fn head_bucket_fails_clearly_on_a_missing_bucket() {
    let name = s3::unique_bucket();
    let store = ObjectStore::new(s3::config(&name)).await.expect("store");

    let error = store.head_bucket().await.expect_err("bucket is missing");

    assert!(
        matches!(error, StorageError::BucketNotFound { .. }),
        "{error}"
    );
    assert_eq!(
        error.to_string(),
        format!("Object storage bucket {name} does not exist")
    );
    assert!(!error.is_retriable());
}

const SENTINEL_SECRET: &str = "sentinel-secret-0f1e2d3c4b5a";

#[tokio::test]
async fn an_unreachable_endpoint_fails_without_naming_it_or_the_secret() {
    for endpoint in ["http://127.0.0.1:1", "http://localhost:1"] {
        let store = ObjectStore::new(StorageConfig {
            endpoint: Some(endpoint.to_owned()),
            credentials: Some(StaticCredentials::new("AKIDSENTINEL", SENTINEL_SECRET)),
            use_path_style: true,
            multipart_threshold_bytes: 1024,
            ..StorageConfig::new("results")
        })
        .await
        .expect("store");

        let small = store
            .put_sealed("external-data/x.json", cipher().seal_raw(b"x".to_vec()))
            .await
            .expect_err("unreachable");
        let large = store
            .put_sealed("external-data/y.json", cipher().seal_raw(plaintext(4096)))
            .await
            .expect_err("unreachable");
        assert!(matches!(small, StorageError::Put { .. }), "{small}");
        assert!(
            matches!(large, StorageError::CreateMultipart { .. }),
            "{large}"
        );
        let errors = [
            small,
            large,
            store.head_bucket().await.expect_err("unreachable"),
            store
                .get("external-data/x.json")
                .await
                .expect_err("unreachable"),
        ];

        for error in errors {
            let texts = [error.to_string(), format!("{error:?}")];
            for text in texts {
                for leaked in [
                    endpoint,
                    "127.0.0.1",
                    "localhost",
                    ":1 ",
                    SENTINEL_SECRET,
                    "AKIDSENTINEL",
                ] {
                    assert!(!text.contains(leaked), "{leaked:?} leaked in {text}");
                }
            }
            assert!(error.is_retriable(), "{error}");
        }
    }
}

#[tokio::test]
async fn a_wrong_secret_fails_without_retrying_or_leaking_it() {
    with_bucket(no_change, |bucket| async move {
        let env = s3::env();
        let store = ObjectStore::new(StorageConfig {
            credentials: Some(StaticCredentials::new(env.access_key, SENTINEL_SECRET)),
            ..s3::config(&bucket.name)
        })
        .await
        .expect("store");

        let error = store
            .put_sealed("external-data/x.json", cipher().seal_raw(b"x".to_vec()))
            .await
            .expect_err("bad signature");

        assert!(matches!(error, StorageError::Put { .. }), "{error}");
        assert!(!error.is_retriable(), "{error}");
        let text = format!("{error} {error:?}");
        assert!(!text.contains(SENTINEL_SECRET), "{text}");
        assert!(bucket.keys().await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn debug_of_the_config_and_the_store_shows_no_credential() {
    let config = StorageConfig {
        endpoint: Some("http://127.0.0.1:9000".into()),
        credentials: Some(StaticCredentials::new("AKIDSENTINEL", SENTINEL_SECRET)),
        ..StorageConfig::new("results")
    };
    let store = ObjectStore::new(config.clone()).await.expect("store");

    for text in [
        format!("{config:?}"),
        format!("{config:#?}"),
        format!("{store:?}"),
        format!("{store:#?}"),
    ] {
        assert!(!text.contains(SENTINEL_SECRET), "{text}");
        assert!(!text.contains("AKIDSENTINEL"), "{text}");
    }
}

#[tokio::test]
async fn invalid_settings_are_refused_with_every_problem() {
    let error = ObjectStore::new(StorageConfig {
        part_size_bytes: MIB,
        ..StorageConfig::new("")
    })
    .await
    .expect_err("invalid");
    let StorageError::InvalidConfig { problems } = &error else {
        panic!("unexpected error: {error}");
    };
    assert_eq!(problems.len(), 2, "{problems:?}");
}

//! Streamed uploads against a real S3 server (s3s-fs): a sealed result streamed through
//! `crypto::SealStream` into `ObjectStore::upload` is stored byte for byte as the one-shot seal,
//! in one PutObject or in parts, and a refused check, an abort or a drop leave no object and no
//! parts behind.

mod support;

use std::time::{Duration, Instant};

use crypto::{CipherKey, HmacKey, SealStream, NONCE_LEN};
use storage::{object_key, StorageConfig, StorageError, Upload};
use uuid::Uuid;

use support::s3::{with_bucket, TestBucket};

const MIB: usize = 1024 * 1024;
const PART: usize = 5 * MIB;
const NONCE: [u8; NONCE_LEN] = [3; NONCE_LEN];

fn cipher() -> CipherKey {
    CipherKey::from_bytes([7; 32])
}

/// Deterministic, incompressible-looking plaintext.
fn plaintext(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn five_mib_parts(config: &mut StorageConfig) {
    config.part_size_bytes = PART;
    config.multipart_threshold_bytes = PART;
}

fn new_key() -> String {
    object_key("stream/", None, Uuid::new_v4())
        .expect("valid key")
        .full
}

/// Seals `plain` through a `SealStream` in 64 KiB pieces, writing each piece's text to `upload`.
async fn stream_sealed(upload: &mut Upload, plain: &[u8]) -> SealStream {
    let mut stream = SealStream::with_nonce(&cipher(), NONCE);
    let mut text = Vec::new();
    for piece in plain.chunks(64 * 1024) {
        stream
            .update(piece, &mut text)
            .expect("within the GCM limit");
        upload.write(&text).await.expect("write");
        text.clear();
    }
    stream
}

async fn finish_sealed(mut upload: Upload, stream: SealStream) -> storage::error::Result<u64> {
    let mut text = Vec::new();
    stream.finish(&mut text);
    upload.write(&text).await?;
    upload.finish(async { Ok(()) }).await
}

async fn e_tag(bucket: &TestBucket, key: &str) -> String {
    let head = bucket
        .client
        .head_object()
        .bucket(&bucket.name)
        .key(key)
        .send()
        .await
        .expect("head object");
    assert_eq!(head.content_type(), Some("application/octet-stream"));
    head.e_tag().expect("etag").trim_matches('"').to_owned()
}

/// Numbers of the parts the server holds for `upload_id`.
async fn stored_parts(bucket: &TestBucket, key: &str, upload_id: &str) -> Vec<i32> {
    let listed = bucket
        .client
        .list_parts()
        .bucket(&bucket.name)
        .key(key)
        .upload_id(upload_id)
        .send()
        .await;
    match listed {
        Ok(listed) => listed
            .parts()
            .iter()
            .filter_map(|p| p.part_number())
            .collect(),
        // A server that forgets the upload altogether holds no part of it either.
        Err(_) => Vec::new(),
    }
}

/// Whether the server still takes parts for `upload_id` (an aborted upload refuses them).
async fn accepts_parts(bucket: &TestBucket, key: &str, upload_id: &str) -> bool {
    bucket
        .client
        .upload_part()
        .bucket(&bucket.name)
        .key(key)
        .upload_id(upload_id)
        .part_number(9_999)
        .body(b"probe".to_vec().into())
        .send()
        .await
        .is_ok()
}

/// Waits until the server holds `count` parts of `upload_id` (sent in the background).
async fn wait_for_parts(bucket: &TestBucket, key: &str, upload_id: &str, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while stored_parts(bucket, key, upload_id).await.len() != count {
        assert!(
            Instant::now() < deadline,
            "{count} parts not stored after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_body_of_at_most_one_part_is_one_put_object_equal_to_the_one_shot_seal() {
    with_bucket(five_mib_parts, |bucket| async move {
        let plain = plaintext(MIB);
        let key = new_key();
        let mut upload = bucket.store.upload(&key);
        let stream = stream_sealed(&mut upload, &plain).await;
        assert_eq!(upload.upload_id(), None, "no multipart upload for one part");
        let stored = finish_sealed(upload, stream).await.expect("finish");

        let expected = cipher().seal_with_nonce(&plain, NONCE);
        assert_eq!(stored, expected.len() as u64);
        let body = bucket.store.get(&key).await.expect("get");
        assert!(body == expected.as_bytes(), "stored text differs");
        assert!(
            !e_tag(&bucket, &key).await.contains('-'),
            "single PutObject"
        );
    })
    .await;
}

#[tokio::test]
async fn a_body_of_exactly_one_part_is_still_one_put_object() {
    with_bucket(five_mib_parts, |bucket| async move {
        let body = vec![b'A'; PART];
        let key = new_key();
        let mut upload = bucket.store.upload(&key);
        upload.write(&body[..PART - 1]).await.expect("write");
        upload.write(&body[PART - 1..]).await.expect("write");
        assert_eq!(upload.upload_id(), None);
        assert_eq!(
            upload.finish(async { Ok(()) }).await.expect("finish"),
            PART as u64
        );
        assert!(bucket.store.get(&key).await.expect("get") == body);
        assert!(!e_tag(&bucket, &key).await.contains('-'));
    })
    .await;
}

#[tokio::test]
async fn a_multi_part_result_is_the_one_shot_seal_and_opens_and_verifies_its_hmac() {
    with_bucket(five_mib_parts, |bucket| async move {
        // 8 MiB of plaintext: 10.7 MiB of text, three parts of 5 MiB (the last one shorter).
        let plain = plaintext(8 * MIB);
        let hmac_key = HmacKey::from_bytes([11; 32]);
        let mut hmac = hmac_key.start();
        for piece in plain.chunks(100_000) {
            hmac.update(piece);
        }
        let signature = hmac.finish_hex();
        let key = new_key();

        let mut upload = bucket.store.upload(&key);
        let stream = stream_sealed(&mut upload, &plain).await;
        assert!(upload.upload_id().is_some(), "parts are on their way");
        let stored = finish_sealed(upload, stream).await.expect("finish");

        let expected = cipher().seal_with_nonce(&plain, NONCE);
        assert_eq!(stored, expected.len() as u64);
        let parts = expected.len().div_ceil(PART);
        assert_eq!(parts, 3);
        let e_tag = e_tag(&bucket, &key).await;
        assert!(e_tag.ends_with(&format!("-{parts}")), "{e_tag}");
        let body = bucket.store.get(&key).await.expect("get");
        assert!(body == expected.as_bytes(), "stored text differs");
        let opened = cipher()
            .open_bytes(&body)
            .expect("opens with the one-shot open");
        assert!(opened == plain);
        assert!(hmac_key.verify_hex(&opened, &signature));
    })
    .await;
}

#[tokio::test]
async fn a_many_part_result_reuses_the_buffers_of_sent_parts() {
    with_bucket(five_mib_parts, |bucket| async move {
        // 29 MiB of plaintext: 38.7 MiB of text, eight parts of 5 MiB (the last one shorter).
        let plain = plaintext(29 * MIB);
        let key = new_key();
        let mut upload = bucket.store.upload(&key);
        let stream = stream_sealed(&mut upload, &plain).await;
        // Three parts in flight and one being filled; before, one fresh buffer per part.
        let allocated = upload.part_buffers_allocated();
        assert!(allocated <= 4, "{allocated} part buffers for 8 parts");
        finish_sealed(upload, stream).await.expect("finish");

        let expected = cipher().seal_with_nonce(&plain, NONCE);
        assert_eq!(expected.len().div_ceil(PART), 8);
        let e_tag = e_tag(&bucket, &key).await;
        assert!(e_tag.ends_with("-8"), "{e_tag}");
        let body = bucket.store.get(&key).await.expect("get");
        assert!(body == expected.as_bytes(), "stored text differs");
    })
    .await;
}

#[tokio::test]
async fn a_refused_check_after_parts_were_uploaded_leaves_no_object_and_no_parts() {
    with_bucket(five_mib_parts, |bucket| async move {
        let key = new_key();
        let mut upload = bucket.store.upload(&key);
        upload
            .write(&vec![b'Q'; 3 * PART + 10])
            .await
            .expect("write");
        let upload_id = upload.upload_id().expect("multipart started").to_owned();

        let (check_bucket, check_key, check_id) = (bucket.clone(), key.clone(), upload_id.clone());
        let refused = upload
            .finish(async move {
                // Right before publishing, every part is in the store.
                let parts = stored_parts(&check_bucket, &check_key, &check_id).await;
                assert_eq!(parts.len(), 4, "{parts:?}");
                Err("the job's claim was lost".to_owned())
            })
            .await
            .expect_err("refused");

        assert!(
            matches!(&refused, StorageError::Refused { reason, .. } if reason == "the job's claim was lost"),
            "{refused}"
        );
        assert!(!refused.is_retriable());
        assert!(!bucket.store.exists(&key).await.expect("exists"));
        assert_eq!(stored_parts(&bucket, &key, &upload_id).await, Vec::<i32>::new());
        assert!(!accepts_parts(&bucket, &key, &upload_id).await, "upload still open");
        assert!(bucket.keys().await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn a_refused_check_on_a_small_body_stores_nothing() {
    with_bucket(five_mib_parts, |bucket| async move {
        let key = new_key();
        let mut upload = bucket.store.upload(&key);
        upload.write(b"small").await.expect("write");
        let refused = upload
            .finish(async { Err("canceled".to_owned()) })
            .await
            .expect_err("refused");
        assert!(matches!(refused, StorageError::Refused { .. }), "{refused}");
        assert!(bucket.keys().await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn an_explicit_abort_removes_the_uploaded_parts() {
    with_bucket(five_mib_parts, |bucket| async move {
        let key = new_key();
        let mut upload = bucket.store.upload(&key);
        upload
            .write(&vec![b'Z'; 2 * PART + 1])
            .await
            .expect("write");
        let upload_id = upload.upload_id().expect("multipart started").to_owned();
        wait_for_parts(&bucket, &key, &upload_id, 2).await;
        upload.abort().await;
        assert_eq!(
            stored_parts(&bucket, &key, &upload_id).await,
            Vec::<i32>::new()
        );
        assert!(
            !accepts_parts(&bucket, &key, &upload_id).await,
            "upload still open"
        );
        assert!(bucket.keys().await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn dropping_an_upload_midway_aborts_it_in_the_background() {
    with_bucket(five_mib_parts, |bucket| async move {
        let key = new_key();
        let mut upload = bucket.store.upload(&key);
        upload
            .write(&vec![b'D'; 2 * PART + 1])
            .await
            .expect("write");
        let upload_id = upload.upload_id().expect("multipart started").to_owned();
        wait_for_parts(&bucket, &key, &upload_id, 2).await;
        drop(upload);

        // The abort runs in a spawned task: wait for its effects, not for a guessed time. The
        // server removes the parts first, then forgets the upload; the parts are watched with
        // reads only, so that no probe part can slip in while they are being removed.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !stored_parts(&bucket, &key, &upload_id).await.is_empty() {
            assert!(
                Instant::now() < deadline,
                "parts of a dropped upload still stored after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        while accepts_parts(&bucket, &key, &upload_id).await {
            assert!(
                Instant::now() < deadline,
                "a dropped upload still open after 30 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(bucket.keys().await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn s3_refusing_the_upload_midway_fails_it_and_leaves_no_object_and_no_parts() {
    with_bucket(five_mib_parts, |bucket| async move {
        let key = new_key();
        let mut upload = bucket.store.upload(&key);
        upload
            .write(&vec![b'R'; 2 * PART + 1])
            .await
            .expect("write");
        let upload_id = upload.upload_id().expect("multipart started").to_owned();
        wait_for_parts(&bucket, &key, &upload_id, 2).await;
        // Behind the store's back, the upload is aborted: the server now refuses what follows.
        bucket
            .client
            .abort_multipart_upload()
            .bucket(&bucket.name)
            .key(&key)
            .upload_id(&upload_id)
            .send()
            .await
            .expect("abort behind the store's back");

        // Three more parts go out in the background; sending the fourth waits for one of them,
        // which the server refused.
        let failed = upload
            .write(&vec![b'R'; 4 * PART + 1])
            .await
            .expect_err("the server refuses the parts");
        assert!(
            matches!(failed, StorageError::UploadPart { .. }),
            "{failed}"
        );
        // The failed upload was aborted and refuses further use.
        let again = upload.write(b"more").await.expect_err("aborted");
        assert!(
            matches!(again, StorageError::UploadAborted { .. }),
            "{again}"
        );
        let again = upload.finish(async { Ok(()) }).await.expect_err("aborted");
        assert!(
            matches!(again, StorageError::UploadAborted { .. }),
            "{again}"
        );
        assert!(!bucket.store.exists(&key).await.expect("exists"));
        assert_eq!(
            stored_parts(&bucket, &key, &upload_id).await,
            Vec::<i32>::new()
        );
        assert!(
            !accepts_parts(&bucket, &key, &upload_id).await,
            "upload still open"
        );
        assert!(bucket.keys().await.is_empty());
    })
    .await;
}

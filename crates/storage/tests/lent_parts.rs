//! Streamed uploads written in place (`Upload::lend` / `give_back`) against a real S3 server
//! (s3s-fs): a seal appended straight into the lent parts fills each part exactly, is stored
//! byte for byte as the one-shot seal, and allocates no more part buffers than the parts in
//! flight plus the one being filled; bytes past a part's room move to the next part; nothing
//! else writes to an upload while its part is lent.

mod support;

use crypto::{CipherKey, SealStream, NONCE_LEN};
use storage::{object_key, PartBuffer, StorageConfig, StorageError, Upload};
use uuid::Uuid;

use support::s3::{with_bucket, TestBucket};

const MIB: usize = 1024 * 1024;
const PART: usize = 5 * MIB;
const NONCE: [u8; NONCE_LEN] = [9; NONCE_LEN];

fn cipher() -> CipherKey {
    CipherKey::from_bytes([5; 32])
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

fn five_mib_parts(config: &mut StorageConfig) {
    config.part_size_bytes = PART;
    config.multipart_threshold_bytes = PART;
}

fn new_key() -> String {
    object_key("lent/", None, Uuid::new_v4())
        .expect("valid key")
        .full
}

/// Seals `plain` in `piece`-byte chunks as the Worker does: each chunk's text appended to the
/// lent part, at most its room, the rest of the chunk into the next part.
async fn seal_in_place(upload: &mut Upload, plain: &[u8], piece: usize) -> SealStream {
    let mut stream = SealStream::with_nonce(&cipher(), NONCE);
    for mut chunk in plain.chunks(piece) {
        while !chunk.is_empty() {
            let mut part = upload.lend().await.expect("lend");
            assert!(part.room() > 0, "a lent part has room");
            let take = stream.fits(part.room()).min(chunk.len());
            assert!(take > 0, "room {}", part.room());
            let capacity = part.buffer().capacity();
            assert!(
                capacity >= PART,
                "a part buffer holds a whole part: {capacity}"
            );
            stream
                .update(&chunk[..take], part.buffer())
                .expect("within the GCM limit");
            // Appending within the room never grows (moves) the part.
            assert_eq!(part.buffer().capacity(), capacity);
            upload.give_back(part).await.expect("give back");
            chunk = &chunk[take..];
        }
    }
    stream
}

/// The sizes of the parts the server holds for the upload, by part number.
async fn part_sizes(bucket: &TestBucket, key: &str, upload_id: &str) -> Vec<(i32, i64)> {
    let listed = bucket
        .client
        .list_parts()
        .bucket(&bucket.name)
        .key(key)
        .upload_id(upload_id)
        .send()
        .await
        .expect("list parts");
    let mut sizes: Vec<(i32, i64)> = listed
        .parts()
        .iter()
        .map(|p| (p.part_number().unwrap_or(0), p.size().unwrap_or(0)))
        .collect();
    sizes.sort_unstable();
    sizes
}

#[tokio::test]
async fn a_seal_appended_into_lent_parts_fills_each_part_exactly_and_reuses_at_most_four_buffers() {
    with_bucket(five_mib_parts, |bucket| async move {
        // 29 MiB of plaintext: 38.7 MiB of text, eight parts of 5 MiB (the last one shorter),
        // in chunks of 128 KiB + 1 so that part ends fall inside chunks.
        let plain = plaintext(29 * MIB);
        let key = new_key();
        let mut upload = bucket.store.upload(&key);
        let stream = seal_in_place(&mut upload, &plain, 128 * 1024 + 1).await;
        let allocated = upload.part_buffers_allocated();
        assert!(allocated <= 4, "{allocated} part buffers for 8 parts");
        let upload_id = upload.upload_id().expect("multipart").to_owned();

        let mut tail = Vec::new();
        stream.finish(&mut tail);
        upload.write(&tail).await.expect("tail");
        // The seven full parts were sent (or are on their way) before the last: every one of
        // them exactly a part long, as S3 gets them when nothing is copied.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let sizes = loop {
            let sizes = part_sizes(&bucket, &key, &upload_id).await;
            if sizes.len() == 7 || std::time::Instant::now() > deadline {
                break sizes;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        assert_eq!(sizes, (1..=7).map(|n| (n, PART as i64)).collect::<Vec<_>>());
        let stored = upload.finish(async { Ok(()) }).await.expect("finish");

        let expected = cipher().seal_with_nonce(&plain, NONCE);
        assert_eq!(stored, expected.len() as u64);
        assert_eq!(expected.len().div_ceil(PART), 8);
        let body = bucket.store.get(&key).await.expect("get");
        assert!(body == expected.as_bytes(), "stored text differs");
    })
    .await;
}

#[tokio::test]
async fn a_small_result_appended_in_place_is_one_put_object() {
    with_bucket(five_mib_parts, |bucket| async move {
        let plain = plaintext(MIB);
        let key = new_key();
        let mut upload = bucket.store.upload(&key);
        let stream = seal_in_place(&mut upload, &plain, 64 * 1024).await;
        assert_eq!(upload.upload_id(), None, "no multipart upload for one part");
        let mut tail = Vec::new();
        stream.finish(&mut tail);
        upload.write(&tail).await.expect("tail");
        upload.finish(async { Ok(()) }).await.expect("finish");
        let expected = cipher().seal_with_nonce(&plain, NONCE);
        assert!(bucket.store.get(&key).await.expect("get") == expected.as_bytes());
    })
    .await;
}

#[tokio::test]
async fn bytes_given_back_past_a_parts_room_go_to_the_next_part() {
    with_bucket(five_mib_parts, |bucket| async move {
        let key = new_key();
        let mut upload = bucket.store.upload(&key);
        upload.write(&vec![b'a'; PART - 10]).await.expect("write");
        let mut part = upload.lend().await.expect("lend");
        assert_eq!(part.room(), 10);
        part.buffer().extend_from_slice(&[b'b'; 25]);
        upload.give_back(part).await.expect("give back");
        assert_eq!(upload.written(), PART as u64 + 15);
        // A buffer of no upload is written as `write` writes.
        let mut own = PartBuffer::unbounded();
        own.buffer().extend_from_slice(b"cc");
        upload.give_back(own).await.expect("give back");
        let upload_id = upload
            .upload_id()
            .expect("the full part was sent")
            .to_owned();
        upload.finish(async { Ok(()) }).await.expect("finish");

        let mut expected = vec![b'a'; PART - 10];
        expected.extend_from_slice(&[b'b'; 25]);
        expected.extend_from_slice(b"cc");
        assert!(bucket.store.get(&key).await.expect("get") == expected);
        assert!(!upload_id.is_empty());
    })
    .await;
}

#[tokio::test]
async fn an_upload_takes_nothing_else_while_its_part_is_lent() {
    with_bucket(five_mib_parts, |bucket| async move {
        let key = new_key();
        let mut upload = bucket.store.upload(&key);
        upload.write(b"head,").await.expect("write");
        let mut part = upload.lend().await.expect("lend");
        let refused = upload.write(b"out of turn").await.expect_err("lent");
        assert!(
            matches!(refused, StorageError::PartLent { .. }),
            "{refused}"
        );
        let refused = upload.lend().await.expect_err("lent");
        assert!(
            matches!(refused, StorageError::PartLent { .. }),
            "{refused}"
        );
        part.buffer().extend_from_slice(b"body");
        upload.give_back(part).await.expect("give back");
        upload.write(b",tail").await.expect("write");
        upload.finish(async { Ok(()) }).await.expect("finish");
        assert!(bucket.store.get(&key).await.expect("get") == b"head,body,tail");
    })
    .await;
}

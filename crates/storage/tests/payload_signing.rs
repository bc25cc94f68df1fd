//! What the store puts in `x-amz-content-sha256`, read on the wire between the store and a real
//! S3 server (s3s-fs): `UNSIGNED-PAYLOAD` for every PutObject and UploadPart by default, the
//! body's SHA-256 with `sign_payload`; both ways with the CRC32 checksum, the server accepting
//! the requests and the object reading back byte for byte; the single PutObject sent directly
//! (not through the SDK's orchestrator) unless the payload is signed. Every request's CRC32 is
//! its body's (the store takes a part's as its bytes arrive, written or lent, and the test
//! server does not check it).

mod support;

use std::io::{Read as _, Write as _};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use storage::{object_key, StorageConfig};
use uuid::Uuid;

use support::s3::{env, with_bucket};

const MIB: usize = 1024 * 1024;
const PART: usize = 5 * MIB;

/// The bytes one client connection sent.
type Recording = Arc<Mutex<Vec<u8>>>;

/// A TCP relay to the test server that keeps every byte the client sends, connection by
/// connection (plain HTTP/1.1: the requests on one connection follow one another).
struct RecordingProxy {
    url: String,
    connections: Arc<Mutex<Vec<Recording>>>,
}

impl RecordingProxy {
    fn start() -> Self {
        let endpoint = env().endpoint;
        let upstream = endpoint
            .strip_prefix("http://")
            .expect("the test server is plain HTTP")
            .trim_end_matches('/')
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let url = format!("http://{}", listener.local_addr().expect("proxy address"));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let recorded = connections.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let server = TcpStream::connect(&upstream).expect("reach the test server");
                let sent = Arc::new(Mutex::new(Vec::new()));
                recorded.lock().expect("recording").push(sent.clone());
                relay(client, server, sent);
            }
        });
        Self { url, connections }
    }

    /// Every request sent so far.
    fn requests(&self) -> Vec<Request> {
        let connections = self.connections.lock().expect("recording").clone();
        let mut requests = Vec::new();
        for sent in connections {
            let sent = sent.lock().expect("recording").clone();
            let mut rest = sent.as_slice();
            while !rest.is_empty() {
                let head_len = rest
                    .windows(4)
                    .position(|window| window == b"\r\n\r\n")
                    .expect("a whole request head");
                let head = String::from_utf8_lossy(&rest[..head_len]).into_owned();
                let mut lines = head.lines();
                let line = lines.next().unwrap_or_default().to_owned();
                let header = |wanted: &str| {
                    head.lines().skip(1).find_map(|header| {
                        let (name, value) = header.split_once(':')?;
                        name.eq_ignore_ascii_case(wanted)
                            .then(|| value.trim().to_owned())
                    })
                };
                let body_len: usize = header("content-length").map_or(0, |length| {
                    length.parse().expect("a numeric Content-Length")
                });
                assert!(
                    header("transfer-encoding").is_none(),
                    "{line}: a chunked body this parser cannot skip"
                );
                let body = &rest[(head_len + 4).min(rest.len())..];
                let body = &body[..body_len.min(body.len())];
                requests.push(Request {
                    digest: header("x-amz-content-sha256"),
                    crc32: header("x-amz-checksum-crc32"),
                    body_crc32: STANDARD.encode(crc32fast::hash(body).to_be_bytes()),
                    through_sdk: header("amz-sdk-invocation-id").is_some(),
                    line,
                });
                rest = &rest[(head_len + 4 + body_len).min(rest.len())..];
            }
        }
        requests
    }
}

/// What the tests look at in one request.
#[derive(Clone, Debug)]
struct Request {
    line: String,
    /// `x-amz-content-sha256`.
    digest: Option<String>,
    /// `x-amz-checksum-crc32`.
    crc32: Option<String>,
    /// The CRC32 of the body the request carried, as that header writes it.
    body_crc32: String,
    /// Sent by the SDK's orchestrator (it names each invocation); the store's direct PutObject
    /// does not.
    through_sdk: bool,
}

fn relay(client: TcpStream, server: TcpStream, sent: Recording) {
    let (mut client_reader, mut server_writer) = (
        client.try_clone().expect("clone"),
        server.try_clone().expect("clone"),
    );
    thread::spawn(move || {
        let mut buffer = vec![0; 64 * 1024];
        while let Ok(read @ 1..) = client_reader.read(&mut buffer) {
            sent.lock()
                .expect("recording")
                .extend_from_slice(&buffer[..read]);
            if server_writer.write_all(&buffer[..read]).is_err() {
                break;
            }
        }
        let _ = server_writer.shutdown(Shutdown::Write);
    });
    let (mut server, mut client) = (server, client);
    thread::spawn(move || {
        let _ = std::io::copy(&mut server, &mut client);
        let _ = client.shutdown(Shutdown::Write);
    });
}

/// Stores a three-part object and a one-request object through the proxy and returns, for the
/// PutObject and UploadPart requests (PUTs naming one of the keys), the digest header each sent.
async fn stored_through_proxy(sign_payload: bool) -> Vec<Request> {
    let proxy = Arc::new(RecordingProxy::start());
    let seen = proxy.clone();
    let digests = Arc::new(Mutex::new(Vec::new()));
    let found = digests.clone();
    with_bucket(
        |config: &mut StorageConfig| {
            config.endpoint = Some(proxy.url.clone());
            config.part_size_bytes = PART;
            config.multipart_threshold_bytes = PART;
            config.sign_payload = sign_payload;
        },
        |bucket| async move {
            let (big, small) = (new_key(), new_key());
            let big_body: Vec<u8> = (0..PART * 2 + MIB).map(|i| b'A' + (i % 26) as u8).collect();
            // Written, then lent and given back with more than the part's room (the rest goes
            // to the next part), then written again.
            let mut upload = bucket.store.upload(&big);
            upload.write(&big_body[..MIB]).await.expect("write");
            let mut lent = upload.lend().await.expect("lend");
            let past_the_part = MIB + lent.room() + MIB;
            lent.buffer()
                .extend_from_slice(&big_body[MIB..past_the_part]);
            upload.give_back(lent).await.expect("give back");
            upload
                .write(&big_body[past_the_part..])
                .await
                .expect("write");
            upload.finish(async { Ok(()) }).await.expect("finish");
            assert!(bucket.store.get(&big).await.expect("get") == big_body);

            let small_body = SMALL_BODY.to_vec();
            let mut upload = bucket.store.upload(&small);
            upload.write(&small_body).await.expect("write");
            upload.finish(async { Ok(()) }).await.expect("finish");
            assert_eq!(bucket.store.get(&small).await.expect("get"), small_body);

            let writes: Vec<_> = seen
                .requests()
                .into_iter()
                .filter(|request| {
                    request.line.starts_with("PUT ")
                        && (request.line.contains(&big) || request.line.contains(&small))
                })
                .collect();
            let parts = writes
                .iter()
                .filter(|request| request.line.contains("partNumber="))
                .count();
            assert_eq!(parts, 3, "{writes:?}");
            assert_eq!(writes.len(), 4, "three parts and one PutObject: {writes:?}");
            *found.lock().expect("digests") = writes;
        },
    )
    .await;
    let writes = digests.lock().expect("digests").clone();
    writes
}

fn new_key() -> String {
    object_key("signing/", None, Uuid::new_v4())
        .expect("valid key")
        .full
}

/// The stored text of the one-request object.
const SMALL_BODY: &[u8] = b"c21hbGwgcmVzdWx0";

#[tokio::test]
async fn by_default_parts_and_puts_go_with_an_unsigned_payload() {
    let requests = stored_through_proxy(false).await;
    let put = requests
        .iter()
        .find(|request| !request.line.contains("partNumber="))
        .expect("the PutObject");
    assert!(
        !put.through_sdk,
        "the single PutObject goes directly: {put:?}"
    );
    assert_eq!(
        put.crc32.as_deref(),
        Some(
            STANDARD
                .encode(crc32fast::hash(SMALL_BODY).to_be_bytes())
                .as_str()
        ),
        "the body's own CRC32"
    );
    for request in requests {
        assert_eq!(
            request.digest.as_deref(),
            Some("UNSIGNED-PAYLOAD"),
            "{request:?}"
        );
        assert_eq!(
            request.crc32.as_deref(),
            Some(request.body_crc32.as_str()),
            "the CRC32 checksum is kept, the body's own: {request:?}"
        );
    }
}

#[tokio::test]
async fn with_sign_payload_every_part_and_put_carries_its_sha256() {
    for request in stored_through_proxy(true).await {
        let digest = request.digest.as_deref().unwrap_or_default();
        assert!(
            digest.len() == 64 && digest.bytes().all(|byte| byte.is_ascii_hexdigit()),
            "{request:?}"
        );
        assert_eq!(
            request.crc32.as_deref(),
            Some(request.body_crc32.as_str()),
            "{request:?}"
        );
        assert!(
            request.through_sdk,
            "a signed payload keeps the SDK's path: {request:?}"
        );
    }
}

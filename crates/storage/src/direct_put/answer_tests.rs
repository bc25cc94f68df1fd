//! The direct PutObject against a server that answers as told: what it tries again, what it
//! does not, and how long one attempt may take. A real S3 server cannot be made to throttle or
//! hang on cue; these answers stand in for it.

use std::io::{BufRead, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Instant;

use super::*;

/// An HTTP/1.1 server on a free port that answers its n-th request with `answers[n]` (the last
/// one again after the list ends; `None`: reads the request and never answers), counting them.
struct Answers {
    url: String,
    requests: Arc<AtomicUsize>,
}

impl Answers {
    fn start(answers: Vec<Option<&'static str>>) -> Answers {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let requests = Arc::new(AtomicUsize::new(0));
        let counted = requests.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (answers, counted) = (answers.clone(), counted.clone());
                thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                    let mut writer = stream;
                    while let Some(body_len) = read_head(&mut reader) {
                        let mut body = vec![0; body_len];
                        if reader.read_exact(&mut body).is_err() {
                            return;
                        }
                        let n = counted.fetch_add(1, Ordering::SeqCst);
                        let answer = answers[n.min(answers.len() - 1)];
                        let Some(answer) = answer else {
                            // Hold the connection open without answering.
                            thread::park();
                            return;
                        };
                        if writer.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Answers { url, requests }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    async fn direct(&self, attempt_timeout: Duration) -> DirectPut {
        let config = StorageConfig {
            endpoint: Some(self.url.clone()),
            use_path_style: true,
            ..StorageConfig::new("results")
        };
        let credentials = Credentials::new("AKID", "secret", None, None, "test");
        DirectPut::new(
            &config,
            Some(credentials),
            None,
            Duration::from_secs(1),
            attempt_timeout,
        )
        .await
        .expect("a plain SigV4 endpoint")
    }
}

/// Reads one request head; the body's length, or `None` at the end of the connection.
fn read_head(reader: &mut impl BufRead) -> Option<usize> {
    let mut body_len = 0;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            return Some(body_len);
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                body_len = value.trim().parse().ok()?;
            }
        }
    }
}

const OK: &str = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
const SLOW_DOWN: &str = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 79\r\n\r\n\
    <Error><Code>SlowDown</Code><Message>Please reduce your rate.</Message></Error>";
const DENIED: &str = "HTTP/1.1 403 Forbidden\r\ncontent-length: 72\r\n\r\n\
    <Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>";

fn body() -> Bytes {
    Bytes::from_static(b"c21hbGwgcmVzdWx0")
}

#[tokio::test]
async fn a_throttled_put_is_tried_again_and_succeeds() {
    let server = Answers::start(vec![Some(SLOW_DOWN), Some(OK)]);
    let direct = server.direct(Duration::from_secs(30)).await;
    let scrubber = Scrubber::new(None, &[]);

    direct
        .put(
            "external-data/a.json",
            body(),
            crc32fast::hash(&body()),
            &scrubber,
        )
        .await
        .expect("the second attempt succeeds");

    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn a_refused_put_is_not_tried_again() {
    let server = Answers::start(vec![Some(DENIED), Some(OK)]);
    let direct = server.direct(Duration::from_secs(30)).await;
    let scrubber = Scrubber::new(None, &[]);

    let cause = direct
        .put(
            "external-data/a.json",
            body(),
            crc32fast::hash(&body()),
            &scrubber,
        )
        .await
        .expect_err("access denied");

    assert_eq!(
        cause.message(),
        "service error: AccessDenied: Access Denied (HTTP 403)"
    );
    assert!(!cause.is_retriable());
    assert_eq!(server.requests(), 1, "no second attempt");
}

#[tokio::test]
async fn a_server_that_keeps_failing_gets_three_attempts() {
    let server = Answers::start(vec![Some(SLOW_DOWN)]);
    let direct = server.direct(Duration::from_secs(30)).await;
    let scrubber = Scrubber::new(None, &[]);

    let cause = direct
        .put(
            "external-data/a.json",
            body(),
            crc32fast::hash(&body()),
            &scrubber,
        )
        .await
        .expect_err("always throttled");

    assert!(cause.is_retriable(), "{cause}");
    assert!(cause.message().contains("SlowDown"), "{cause}");
    assert_eq!(server.requests(), ATTEMPTS as usize);
}

#[tokio::test]
async fn an_attempt_that_gets_no_answer_ends_at_its_timeout() {
    let server = Answers::start(vec![None]);
    let timeout = Duration::from_millis(300);
    let direct = server.direct(timeout).await;
    let scrubber = Scrubber::new(None, &[]);
    let started = Instant::now();

    let cause = direct
        .put(
            "external-data/a.json",
            body(),
            crc32fast::hash(&body()),
            &scrubber,
        )
        .await
        .expect_err("no answer");

    assert!(cause.message().starts_with("timeout: "), "{cause}");
    assert!(cause.is_retriable(), "{cause}");
    assert_eq!(
        server.requests(),
        ATTEMPTS as usize,
        "each attempt timed out"
    );
    assert!(
        started.elapsed() >= timeout * ATTEMPTS,
        "{:?}",
        started.elapsed()
    );
}

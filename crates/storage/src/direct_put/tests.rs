//! The direct PutObject's pure parts, and its credentials cache with a counting provider.

use super::*;

#[test]
fn keys_are_escaped_as_the_sdk_does_but_for_slashes() {
    assert_eq!(
        escape_key("pre fix/tenant+1/external-data/a~b_c.json"),
        "pre%20fix/tenant%2B1/external-data/a~b_c.json"
    );
    assert_eq!(escape_key("ä/%"), "%C3%A4/%25");
}

#[test]
fn an_error_answer_says_its_code_message_and_status_only() {
    let scrubber = Scrubber::new(None, &["AKIDSENTINEL"]);
    let body = b"<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>\
        <Message>The signature &amp; more</Message><AWSAccessKeyId>AKIDSENTINEL\
        </AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256</StringToSign></Error>";
    let failure = answer_cause(http::StatusCode::FORBIDDEN, body, &scrubber);
    assert_eq!(
        failure.message(),
        "service error: SignatureDoesNotMatch: The signature & more (HTTP 403)"
    );
    assert!(!failure.is_retriable());
}

#[test]
fn throttling_and_server_errors_may_be_retried() {
    let scrubber = Scrubber::new(None, &[]);
    let slow = b"<Error><Code>SlowDown</Code><Message>Reduce</Message></Error>";
    assert!(answer_cause(http::StatusCode::BAD_REQUEST, slow, &scrubber).is_retriable());
    assert!(answer_cause(http::StatusCode::BAD_GATEWAY, b"", &scrubber).is_retriable());
    assert!(answer_cause(http::StatusCode::TOO_MANY_REQUESTS, b"", &scrubber).is_retriable());
    let empty = answer_cause(http::StatusCode::NOT_FOUND, b"", &scrubber);
    assert_eq!(empty.message(), "service error (HTTP 404)");
    assert!(!empty.is_retriable());
}

async fn bucket_url(config: StorageConfig) -> Option<String> {
    let credentials = Credentials::new("AKID", "secret", None, None, "test");
    let timeout = Duration::from_secs(1);
    DirectPut::new(&config, Some(credentials), None, timeout, timeout)
        .await
        .map(|direct| direct.bucket_url)
        .ok()
}

#[tokio::test]
async fn the_url_is_the_one_the_sdk_rules_give() {
    let path_style = StorageConfig {
        endpoint: Some("http://127.0.0.1:9000/".into()),
        use_path_style: true,
        ..StorageConfig::new("results")
    };
    assert_eq!(
        bucket_url(path_style).await.as_deref(),
        Some("http://127.0.0.1:9000/results")
    );
    let aws = StorageConfig {
        region: "eu-west-1".into(),
        ..StorageConfig::new("results")
    };
    assert_eq!(
        bucket_url(aws).await.as_deref(),
        Some("https://results.s3.eu-west-1.amazonaws.com")
    );
    // A dotted bucket cannot be a TLS host name: the rules fall back to the path.
    let dotted = StorageConfig::new("my.results");
    assert_eq!(
        bucket_url(dotted).await.as_deref(),
        Some("https://s3.us-east-1.amazonaws.com/my.results")
    );
}

#[tokio::test]
async fn the_sdk_keeps_what_is_not_plain_sigv4_or_a_signed_payload() {
    // An S3 Express directory bucket signs with its own session scheme.
    let express = StorageConfig {
        region: "us-west-2".into(),
        ..StorageConfig::new("results--usw2-az1--x-s3")
    };
    assert_eq!(bucket_url(express).await, None);
    let signed = StorageConfig {
        sign_payload: true,
        ..StorageConfig::new("results")
    };
    assert_eq!(bucket_url(signed).await, None);
}

#[test]
fn only_plain_sigv4_for_s3_is_taken() {
    let scheme = |name: &str| {
        vec![EndpointAuthScheme::with_capacity(name.to_owned(), 2)
            .put("signingName", "s3")
            .put("signingRegion", "eu-west-1")]
    };
    assert_eq!(
        plain_sigv4_region(&scheme("sigv4")).as_deref(),
        Some("eu-west-1")
    );
    assert_eq!(plain_sigv4_region(&scheme("sigv4a")), None);
    assert_eq!(plain_sigv4_region(&scheme("sigv4-s3express")), None);
    assert_eq!(plain_sigv4_region(&[]), None);
}

/// A provider that counts its calls and gives credentials expiring `valid_for` from now, or
/// fails as `fail` says.
#[derive(Debug)]
struct Counting {
    calls: std::sync::atomic::AtomicUsize,
    valid_for: Duration,
    fail: Option<fn() -> aws_credential_types::provider::error::CredentialsError>,
}

impl aws_sdk_s3::config::ProvideCredentials for Counting {
    fn provide_credentials<'a>(
        &'a self,
    ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let expiry = SystemTime::now() + self.valid_for;
        aws_credential_types::provider::future::ProvideCredentials::ready(match self.fail {
            Some(fail) => Err(fail()),
            None => Ok(Credentials::new(
                "AKID",
                "secret",
                None,
                Some(expiry),
                "test",
            )),
        })
    }
}

async fn provided(counting: Arc<Counting>) -> DirectPut {
    let config = StorageConfig {
        endpoint: Some("http://127.0.0.1:9000".into()),
        use_path_style: true,
        ..StorageConfig::new("results")
    };
    let provider = SharedCredentialsProvider::new(CountingRef(counting));
    let timeout = Duration::from_secs(1);
    DirectPut::new(&config, None, Some(provider), timeout, timeout)
        .await
        .expect("a plain SigV4 endpoint")
}

/// The shared counter as a provider (the test keeps the other handle).
#[derive(Debug)]
struct CountingRef(Arc<Counting>);

impl aws_sdk_s3::config::ProvideCredentials for CountingRef {
    fn provide_credentials<'a>(
        &'a self,
    ) -> aws_credential_types::provider::future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        self.0.provide_credentials()
    }
}

fn counting(valid_for: Duration) -> Arc<Counting> {
    Arc::new(Counting {
        calls: Default::default(),
        valid_for,
        fail: None,
    })
}

#[tokio::test]
async fn provided_credentials_are_asked_for_again_only_near_their_expiry() {
    let scrubber = Scrubber::new(None, &[]);
    let lasting = counting(Duration::from_secs(3600));
    let direct = provided(lasting.clone()).await;
    for _ in 0..3 {
        direct.identity(&scrubber).await.expect("credentials");
    }
    assert_eq!(lasting.calls.load(std::sync::atomic::Ordering::SeqCst), 1);

    let expiring = counting(Duration::from_secs(60));
    let direct = provided(expiring.clone()).await;
    for _ in 0..3 {
        direct.identity(&scrubber).await.expect("credentials");
    }
    assert_eq!(expiring.calls.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_provider_that_failed_may_be_asked_again_one_that_has_none_not() {
    use aws_credential_types::provider::error::CredentialsError;
    let scrubber = Scrubber::new(None, &[]);
    for (fail, retriable) in [
        (
            (|| CredentialsError::provider_error("metadata service busy"))
                as fn() -> CredentialsError,
            true,
        ),
        (|| CredentialsError::not_loaded("no source"), false),
    ] {
        let direct = provided(Arc::new(Counting {
            calls: Default::default(),
            valid_for: Duration::from_secs(3600),
            fail: Some(fail),
        }))
        .await;
        let cause = direct
            .identity(&scrubber)
            .await
            .expect_err("no credentials");
        assert!(cause.message().starts_with("no credentials: "), "{cause}");
        assert_eq!(cause.is_retriable(), retriable, "{cause}");
    }
}

//! `DirectPut`: a body of one part stored with one PutObject sent straight through hyper.
//!
//! The SDK's orchestrator (its config bag, interceptors, endpoint rules, identity cache, user
//! agent and stalled-stream timers) cost a small job more CPU than the request itself: 250 us
//! against 100 us per 1.4 KiB PutObject, measured in one process (BENCHMARKS.md, "A small
//! result's PutObject without the SDK's orchestrator"). What the SDK decides is still what is
//! used: the object's URL comes from the SDK's own endpoint rules (resolved once per store, as
//! the SDK's single-entry cache would), the request is signed by the SDK's SigV4 signer
//! (`aws-sigv4`) with the credentials of the store's provider, and it carries the same
//! `x-amz-checksum-crc32` header. Where the rules ask for anything but plain SigV4 (S3 Express,
//! SigV4a multi-region access points) or for extra headers, the store keeps the SDK's path.
//! Retries follow the SDK's standard mode: 3 attempts, exponential backoff with full jitter.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use aws_sdk_s3::config::endpoint::{Params, ResolveEndpoint as _};
use aws_sdk_s3::config::{Credentials, ProvideCredentials as _, SharedCredentialsProvider};
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode,
};
use aws_smithy_runtime_api::client::identity::Identity;
use aws_smithy_types::endpoint::EndpointAuthScheme;
use aws_smithy_types::Document;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::Mutex;

use super::checksum;
use super::config::StorageConfig;
use super::error::Cause;
use super::scrubber::{cause_chain, is_transient_code, Scrubber};
use super::store::CONTENT_TYPE;

/// Attempts per request, as the SDK's standard retry mode (`MAX_ATTEMPTS` in `store`).
const ATTEMPTS: u32 = 3;
/// The longest wait between attempts (the SDK's standard mode caps its backoff at 20 s).
const MAX_BACKOFF: Duration = Duration::from_secs(20);
/// Provided credentials are asked for again this long before they expire.
const REFRESH_BEFORE_EXPIRY: Duration = Duration::from_secs(300);
/// An error answer's body is read up to this size (its code and message are near the top).
const MAX_ERROR_BODY: usize = 16 * 1024;
/// An error's message from the server is cut to this many characters.
const MAX_MESSAGE_CHARS: usize = 300;

type HttpsClient = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Sends single PutObject requests for one bucket.
pub(crate) struct DirectPut {
    client: HttpsClient,
    /// The bucket's URL as the SDK's endpoint rules give it, without a trailing `/`.
    bucket_url: String,
    signing_region: String,
    credentials: CredentialSource,
    connect_timeout: Duration,
    attempt_timeout: Duration,
}

impl fmt::Debug for DirectPut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirectPut").finish_non_exhaustive()
    }
}

/// Where the signing credentials come from.
enum CredentialSource {
    Static(Identity),
    /// The store's provider (the SDK's default chain), asked again near the expiry of what it
    /// gave; one refresh at a time.
    Provided {
        provider: SharedCredentialsProvider,
        current: Mutex<Option<Credentials>>,
    },
}

impl DirectPut {
    /// The direct path for `config`'s bucket, or why the store keeps the SDK's: the
    /// endpoint rules ask for another signing scheme or for headers, or the system's root
    /// certificates cannot be read (the SDK then reports what is wrong on the first request).
    pub(crate) async fn new(
        config: &StorageConfig,
        static_credentials: Option<Credentials>,
        provider: Option<SharedCredentialsProvider>,
        connect_timeout: Duration,
        attempt_timeout: Duration,
    ) -> Result<Self, &'static str> {
        // A signed payload needs the body's SHA-256, which the SDK computes; its path is kept.
        if config.sign_payload {
            return Err("the payload is signed");
        }
        let mut params = Params::builder()
            .bucket(config.bucket.clone())
            .region(config.effective_region().to_owned())
            .force_path_style(config.use_path_style);
        if let Some(endpoint) = &config.endpoint {
            params = params.endpoint(endpoint.clone());
        }
        let params = params
            .build()
            .map_err(|_| "the endpoint rules' parameters are incomplete")?;
        let endpoint = aws_sdk_s3::config::endpoint::DefaultResolver::new()
            .resolve_endpoint(&params)
            .await
            .map_err(|_| "the endpoint rules give no endpoint for the bucket")?;
        if endpoint.headers().next().is_some() {
            return Err("the endpoint rules add headers");
        }
        let signing_region = plain_sigv4_region(endpoint.auth_schemes())
            .ok_or("the endpoint rules ask for another signing scheme than SigV4")?;
        let credentials = match (static_credentials, provider) {
            (Some(credentials), _) => CredentialSource::Static(credentials.into()),
            (None, Some(provider)) => CredentialSource::Provided {
                provider,
                current: Mutex::new(None),
            },
            (None, None) => return Err("no credentials provider"),
        };
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(connect_timeout));
        http.set_nodelay(true);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_provider_and_native_roots(Arc::new(rustls::crypto::ring::default_provider()))
            .map_err(|_| "the system's root certificates cannot be read")?
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        Ok(Self {
            client: Client::builder(TokioExecutor::new()).build(connector),
            bucket_url: endpoint.url().trim_end_matches('/').to_owned(),
            signing_region,
            credentials,
            connect_timeout,
            attempt_timeout,
        })
    }

    /// Stores `body`, whose CRC32 is `crc32`, under `key` (the key as S3 names it: unescaped),
    /// trying up to three times where a retry may help.
    pub(crate) async fn put(
        &self,
        key: &str,
        body: Bytes,
        crc32: u32,
        scrubber: &Scrubber,
    ) -> Result<(), Cause> {
        let url = format!("{}/{}", self.bucket_url, escape_key(key));
        let crc32 = checksum::header(crc32);
        let mut attempt = 1;
        loop {
            let failure = match self.attempt(&url, &crc32, body.clone(), scrubber).await {
                Ok(()) => return Ok(()),
                Err(failure) => failure,
            };
            if !failure.is_retriable() || attempt >= ATTEMPTS {
                return Err(failure);
            }
            let ceiling = Duration::from_secs(1 << (attempt - 1)).min(MAX_BACKOFF);
            tokio::time::sleep(ceiling.mul_f64(fastrand::f64())).await;
            attempt += 1;
        }
    }

    async fn attempt(
        &self,
        url: &str,
        crc32: &str,
        body: Bytes,
        scrubber: &Scrubber,
    ) -> Result<(), Cause> {
        let identity = self.identity(scrubber).await?;
        let mut request = http::Request::builder()
            .method(http::Method::PUT)
            .uri(url)
            .header(http::header::CONTENT_TYPE, CONTENT_TYPE)
            .header(http::header::CONTENT_LENGTH, body.len())
            .header("x-amz-sdk-checksum-algorithm", "CRC32")
            .header("x-amz-checksum-crc32", crc32)
            .body(Full::new(body))
            .map_err(|error| scrubber.other(&error, false))?;
        let mut settings = SigningSettings::default();
        // S3 signs the path as sent: escaped once, never normalized (`a/../b` is a key).
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(&self.signing_region)
            .name("s3")
            .time(SystemTime::now())
            .settings(settings)
            .build()
            .map_err(|error| scrubber.other(&error, false))?
            .into();
        let headers = request
            .headers()
            .iter()
            .map(|(name, value)| (name.as_str(), value.to_str().unwrap_or_default()));
        let signable = SignableRequest::new("PUT", url, headers, SignableBody::UnsignedPayload)
            .map_err(|error| scrubber.other(&error, false))?;
        let (instructions, _signature) = sign(signable, &params)
            .map_err(|error| scrubber.other(&error, false))?
            .into_parts();
        instructions.apply_to_request_http1x(&mut request);

        let exchange = async {
            let response = self.client.request(request).await.map_err(|error| {
                scrubber.other(&format!("dispatch failure: {}", cause_chain(&error)), true)
            })?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_ERROR_BODY)
                .collect()
                .await
                .map(|collected| collected.to_bytes())
                .unwrap_or_default();
            if status.is_success() {
                return Ok(());
            }
            Err(answer_cause(status, &body, scrubber))
        };
        match tokio::time::timeout(self.attempt_timeout, exchange).await {
            Ok(outcome) => outcome,
            Err(_) => Err(scrubber.other(
                &format!(
                    "timeout: the attempt took longer than {} s (connect timeout {} s)",
                    self.attempt_timeout.as_secs(),
                    self.connect_timeout.as_secs()
                ),
                true,
            )),
        }
    }

    /// The credentials to sign with: the static ones, or the provider's, asked again when
    /// none are held yet or they expire within [`REFRESH_BEFORE_EXPIRY`].
    async fn identity(&self, scrubber: &Scrubber) -> Result<Identity, Cause> {
        let (provider, current) = match &self.credentials {
            CredentialSource::Static(identity) => return Ok(identity.clone()),
            CredentialSource::Provided { provider, current } => (provider, current),
        };
        let mut current = current.lock().await;
        let fresh = current.as_ref().filter(|credentials| {
            credentials.expiry().is_none_or(|expiry| {
                expiry
                    .duration_since(SystemTime::now())
                    .is_ok_and(|left| left > REFRESH_BEFORE_EXPIRY)
            })
        });
        if let Some(credentials) = fresh {
            return Ok(credentials.clone().into());
        }
        let credentials = provider.provide_credentials().await.map_err(|error| {
            use aws_credential_types::provider::error::CredentialsError;
            let retriable = matches!(
                error,
                CredentialsError::ProviderTimedOut(_) | CredentialsError::ProviderError(_)
            );
            scrubber.other(
                &format!("no credentials: {}", cause_chain(&error)),
                retriable,
            )
        })?;
        *current = Some(credentials.clone());
        Ok(credentials.into())
    }
}

/// The signing region of the endpoint's first auth scheme when it is plain SigV4 for S3.
fn plain_sigv4_region(schemes: &[EndpointAuthScheme]) -> Option<String> {
    let scheme = schemes.first()?;
    let text = |name: &str| match scheme.get(name) {
        Some(Document::String(text)) => Some(text.as_str()),
        _ => None,
    };
    (scheme.name() == "sigv4" && text("signingName").is_none_or(|name| name == "s3"))
        .then(|| text("signingRegion").map(str::to_owned))
        .flatten()
}

/// The key as a URL path: every byte but the unreserved ones and `/` percent-encoded (the
/// SDK's greedy label encoding).
fn escape_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 8);
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A failure from an error answer: its status and, from the S3 error body, the code and the
/// message (never the rest: a `SignatureDoesNotMatch` body echoes the access key id and the
/// string to sign).
fn answer_cause(status: http::StatusCode, body: &[u8], scrubber: &Scrubber) -> Cause {
    let body = String::from_utf8_lossy(body);
    let code = xml_element(&body, "Code");
    let message = xml_element(&body, "Message");
    let mut text = String::from("service error");
    for part in [&code, &message].into_iter().flatten() {
        text.push_str(": ");
        text.extend(part.chars().take(MAX_MESSAGE_CHARS));
    }
    text.push_str(&format!(" (HTTP {})", status.as_u16()));
    let retriable = status.is_server_error()
        || status == http::StatusCode::TOO_MANY_REQUESTS
        || code.as_deref().is_some_and(is_transient_code);
    scrubber.other(&text, retriable)
}

/// The text of the first `<name>` element, entities decoded.
fn xml_element(body: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = body.find(&open)? + open.len();
    let end = start + body[start..].find(&format!("</{name}>"))?;
    let text = body[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&");
    Some(text.trim().to_owned()).filter(|text| !text.is_empty())
}

#[cfg(test)]
mod answer_tests;
#[cfg(test)]
mod tests;

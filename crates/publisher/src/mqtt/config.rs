//! The MQTT publisher's configuration: the broker URL, who we are, the secret password, TLS.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rumqttc::tokio_rustls::rustls;
use rumqttc::{MqttOptions, TlsConfiguration, Transport};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use secrecy::{ExposeSecret, SecretString};

use super::error::MqttError;

/// The broker: `mqtt://host[:port]` (1883) or `mqtts://host[:port]` (8883, TLS). Credentials go
/// in [`MqttConfig::username`] and [`MqttConfig::password`], never in the URL, so the URL can be
/// shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MqttUrl {
    pub tls: bool,
    pub host: String,
    pub port: u16,
}

impl MqttUrl {
    /// Parses `text`; the error says what is wrong without repeating the text (it may hold a
    /// password someone put there).
    pub fn parse(text: &str) -> Result<MqttUrl, MqttError> {
        let bad = |why: &str| MqttError::Config(format!("MQTT_URL {why}"));
        let (tls, rest) = if let Some(rest) = text.strip_prefix("mqtts://") {
            (true, rest)
        } else if let Some(rest) = text.strip_prefix("mqtt://") {
            (false, rest)
        } else {
            return Err(bad("must start with mqtt:// or mqtts://"));
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains('@') {
            return Err(bad(
                "must not hold credentials; set MQTT_USERNAME and MQTT_PASSWORD",
            ));
        }
        if authority.contains(['/', '?', '#']) {
            return Err(bad("must be a scheme, a host and a port, with no path"));
        }
        let default_port = if tls { 8883 } else { 1883 };
        let (host, port) = match authority.rsplit_once(':') {
            // An IPv6 literal without a port (`[::1]`) has colons but ends with `]`.
            Some((host, port)) if !port.ends_with(']') => {
                let port = port
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| bad("has a port that is not 1 to 65535"))?;
                (host, port)
            }
            _ => (authority, default_port),
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("has no host"));
        }
        Ok(MqttUrl {
            tls,
            host: host.to_owned(),
            port,
        })
    }
}

impl fmt::Display for MqttUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "mqtts" } else { "mqtt" };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// What [`MqttPublisher::start`](super::MqttPublisher::start) needs. Build it with
/// [`MqttConfig::new`] and adjust the public fields.
#[derive(Clone)]
pub struct MqttConfig {
    pub url: MqttUrl,
    /// The client id, stable across restarts so the broker resumes the session.
    pub client_id: String,
    pub username: Option<String>,
    /// A secret: never logged, displayed or carried in an error.
    pub password: Option<SecretString>,
    pub keep_alive: Duration,
    /// PEM CA certificates to trust for `mqtts://` instead of the system's roots.
    pub ca_file: Option<PathBuf>,
    /// Publishes in flight at once (waiting for their PUBACK).
    pub in_flight: u16,
    /// How long a publish waits for its PUBACK before it counts as failed.
    pub ack_timeout: Duration,
    /// How long one connection attempt may take.
    pub connect_timeout: Duration,
    /// The longest wait between two connection attempts (the backoff starts at 100 ms).
    pub max_reconnect_delay: Duration,
}

impl fmt::Debug for MqttConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MqttConfig")
            .field("url", &self.url)
            .field("client_id", &self.client_id)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("keep_alive", &self.keep_alive)
            .field("ca_file", &self.ca_file)
            .field("in_flight", &self.in_flight)
            .field("ack_timeout", &self.ack_timeout)
            .finish_non_exhaustive()
    }
}

impl MqttConfig {
    /// Defaults: 30 s keep-alive, 100 in flight, 10 s ack timeout, 5 s connect timeout,
    /// reconnecting at most every 5 s.
    pub fn new(url: MqttUrl, client_id: impl Into<String>) -> MqttConfig {
        MqttConfig {
            url,
            client_id: client_id.into(),
            username: None,
            password: None,
            keep_alive: Duration::from_secs(30),
            ca_file: None,
            in_flight: 100,
            ack_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(5),
            max_reconnect_delay: Duration::from_secs(5),
        }
    }

    /// `rumqttc`'s options: a persistent session (`clean_session` off), QoS 1 flow control at
    /// [`MqttConfig::in_flight`], TLS when the URL says so. Reads the CA file, if any.
    pub(super) fn options(&self) -> Result<MqttOptions, MqttError> {
        let mut options = MqttOptions::new(&self.client_id, &self.url.host, self.url.port);
        options
            .set_keep_alive(self.keep_alive.max(Duration::from_secs(1)))
            .set_clean_session(false)
            .set_inflight(self.in_flight.max(1))
            // The driver bounds what it queues by `in_flight`; room for that and a margin.
            .set_request_channel_capacity(usize::from(self.in_flight.max(1)) * 2);
        if let Some(username) = &self.username {
            let password = self
                .password
                .as_ref()
                .map(|p| p.expose_secret().to_owned())
                .unwrap_or_default();
            options.set_credentials(username, password);
        }
        if self.url.tls {
            options.set_transport(Transport::tls_with_config(self.tls()?));
        }
        Ok(options)
    }

    /// A rustls client with ring (the provider lapin and sqlx use; naming it avoids relying on a
    /// process-wide default) and the CA file's certificates or the system's roots.
    fn tls(&self) -> Result<TlsConfiguration, MqttError> {
        let mut roots = rustls::RootCertStore::empty();
        match &self.ca_file {
            Some(path) => {
                let certificates = CertificateDer::pem_file_iter(path)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|_| {
                        MqttError::Config(format!(
                            "MQTT_CA_FILE {} does not read as PEM certificates",
                            path.display()
                        ))
                    })?;
                for certificate in certificates {
                    roots.add(certificate).map_err(|_| {
                        MqttError::Config("MQTT_CA_FILE holds an invalid certificate".into())
                    })?;
                }
            }
            None => {
                for certificate in rustls_native_certs::load_native_certs().certs {
                    // A system root rustls cannot use is skipped, as browsers do.
                    let _ = roots.add(certificate);
                }
            }
        }
        if roots.is_empty() {
            return Err(MqttError::Config(
                "mqtts:// has no CA certificate to trust (set MQTT_CA_FILE)".into(),
            ));
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|_| MqttError::Config("TLS protocol versions".into()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(TlsConfiguration::Rustls(Arc::new(config)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_default_ports_and_refuse_credentials() {
        let url = MqttUrl::parse("mqtt://127.0.0.1").unwrap();
        assert_eq!(
            (url.tls, url.host.as_str(), url.port),
            (false, "127.0.0.1", 1883)
        );
        let url = MqttUrl::parse("mqtts://broker.internal:18883/").unwrap();
        assert_eq!((url.tls, url.port), (true, 18883));
        assert_eq!(url.to_string(), "mqtts://broker.internal:18883");
        let url = MqttUrl::parse("mqtt://[::1]").unwrap();
        assert_eq!((url.host.as_str(), url.port), ("::1", 1883));
        assert_eq!(MqttUrl::parse("mqtt://[::1]:2000").unwrap().port, 2000);
        for bad in [
            "tcp://h:1",
            "mqtt://",
            "mqtt://h:0",
            "mqtt://h:99999",
            "mqtt://h/path",
            "mqtt://user:s3cret@h",
        ] {
            let error = MqttUrl::parse(bad).unwrap_err().to_string();
            assert!(!error.contains("s3cret"), "{error}");
            assert!(error.contains("MQTT_URL"), "{error}");
        }
    }

    #[test]
    fn debug_never_shows_the_password() {
        let mut config = MqttConfig::new(MqttUrl::parse("mqtt://h").unwrap(), "w-1");
        config.username = Some("fetcher".into());
        config.password = Some(SecretString::from("s3cr3t-pass"));
        let printed = format!("{config:?}");
        assert!(!printed.contains("s3cr3t-pass"), "{printed}");
        assert!(printed.contains("<redacted>"), "{printed}");
    }

    #[test]
    fn a_ca_file_that_is_not_pem_is_a_clear_error() {
        let path = std::env::temp_dir().join(format!("not-a-ca-{}.pem", std::process::id()));
        std::fs::write(&path, "hello").unwrap();
        let mut config = MqttConfig::new(MqttUrl::parse("mqtts://h").unwrap(), "w-1");
        config.ca_file = Some(path.clone());
        let error = config.options().unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(error.contains("MQTT_CA_FILE"), "{error}");
    }
}

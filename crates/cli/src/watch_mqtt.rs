//! `fetcherctl watch --mqtt URL`: subscribes to the MQTT mirror's `<prefix>/events/#`
//! (lifecycle §5) and prints its events, deduplicated by `eventId`, so a person can watch both
//! channels side by side (`fetcherctl watch` in another terminal shows the AMQP events).
//!
//! The mirror's payloads are the IoT Jobs shapes, unsigned: what is checked here is that each
//! is a JSON object with an `eventId` and a `jobId`; anything else is reported and skipped.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use rumqttc::tokio_rustls::rustls;
use rumqttc::{AsyncClient, Event, MqttOptions, Packet, QoS, TlsConfiguration, Transport};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde_json::Value;
use tokio::time::Instant;
use uuid::Uuid;

/// What the MQTT watch is asked.
pub struct MqttWatch<'a> {
    pub url: &'a str,
    pub prefix: &'a str,
    /// PEM CA certificates for `mqtts://` instead of the system's roots.
    pub ca_file: Option<&'a Path>,
    pub job: Option<Uuid>,
    pub count: Option<u64>,
    pub timeout: Option<u64>,
    pub json: bool,
}

/// `mqtt://host[:port]` or `mqtts://host[:port]` as options: a fresh client id, a clean
/// session, credentials from `MQTT_USERNAME` and `MQTT_PASSWORD` (over `mqtt://` only with
/// `MQTT_ALLOW_CLEARTEXT_PASSWORD=true`, the Worker's rule), TLS with the CA file's
/// certificates or the system's roots.
/// Whether `MQTT_ALLOW_CLEARTEXT_PASSWORD` says yes (`true`, any case).
fn cleartext_allowed(value: Option<String>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

fn options(url: &str, ca_file: Option<&Path>) -> anyhow::Result<MqttOptions> {
    let (tls, rest) = match (url.strip_prefix("mqtts://"), url.strip_prefix("mqtt://")) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (false, rest),
        _ => bail!("--mqtt must be mqtt://host[:port] or mqtts://host[:port]"),
    };
    let authority = rest.trim_end_matches('/');
    if authority.contains(['@', '/', '?']) {
        bail!("--mqtt must be a scheme, a host and a port (credentials: MQTT_USERNAME, MQTT_PASSWORD)");
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => (
            host,
            port.parse::<u16>()
                .map_err(|_| anyhow!("--mqtt has a port that is not 1 to 65535"))?,
        ),
        None => (authority, if tls { 8883 } else { 1883 }),
    };
    if host.is_empty() {
        bail!("--mqtt has no host");
    }
    let id = format!("fetcherctl-watch-{}", Uuid::new_v4().simple());
    let mut options = MqttOptions::new(id, host, port);
    options.set_keep_alive(Duration::from_secs(30));
    if let Ok(username) = std::env::var("MQTT_USERNAME") {
        if !tls && !cleartext_allowed(std::env::var("MQTT_ALLOW_CLEARTEXT_PASSWORD").ok()) {
            bail!(
                "MQTT_USERNAME is set and --mqtt is mqtt://: the password would cross the network \
                 in clear text; use mqtts://, or set MQTT_ALLOW_CLEARTEXT_PASSWORD=true (as the \
                 Worker asks)"
            );
        }
        options.set_credentials(username, std::env::var("MQTT_PASSWORD").unwrap_or_default());
    }
    if tls {
        let roots = roots(ca_file)?;
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|_| anyhow!("TLS protocol versions"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        options.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(
            Arc::new(config),
        )));
    }
    Ok(options)
}

/// The certificates TLS trusts: the CA file's, or the system's roots.
fn roots(ca_file: Option<&Path>) -> anyhow::Result<rustls::RootCertStore> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        Some(path) => {
            let certificates = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|_| {
                    anyhow!(
                        "--mqtt-ca-file {} does not read as PEM certificates",
                        path.display()
                    )
                })?;
            if certificates.is_empty() {
                bail!("--mqtt-ca-file {} holds no PEM certificate", path.display());
            }
            for certificate in certificates {
                roots
                    .add(certificate)
                    .map_err(|_| anyhow!("--mqtt-ca-file holds an invalid certificate"))?;
            }
        }
        None => {
            for certificate in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(certificate);
            }
        }
    }
    if roots.is_empty() {
        bail!("mqtts:// has no CA certificate to trust (--mqtt-ca-file)");
    }
    Ok(roots)
}

pub async fn run(watch: MqttWatch<'_>) -> anyhow::Result<()> {
    let options = options(watch.url, watch.ca_file)?;
    let filter = format!("{}/events/#", watch.prefix);
    let (client, mut events) = AsyncClient::new(options, 16);
    client
        .subscribe(&filter, QoS::AtLeastOnce)
        .await
        .context("Failed to subscribe")?;
    let deadline = watch
        .timeout
        .map(|secs| Instant::now() + Duration::from_secs(secs));
    let mut seen = HashSet::new();
    let mut shown = 0u64;
    let mut out = std::io::stdout().lock();
    loop {
        if watch.count.is_some_and(|count| shown >= count) {
            let _ = client.try_disconnect();
            return Ok(());
        }
        let polled = match deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, events.poll()).await {
                Ok(polled) => polled,
                Err(_) => {
                    if let Some(count) = watch.count {
                        bail!("{shown} of {count} events within the timeout");
                    }
                    return Ok(());
                }
            },
            None => events.poll().await,
        };
        let publish = match polled {
            Ok(Event::Incoming(Packet::Publish(publish))) => publish,
            Ok(Event::Incoming(Packet::SubAck(_))) => {
                eprintln!("Watching MQTT topics {filter}");
                continue;
            }
            Ok(_) => continue,
            Err(error) => {
                eprintln!("MQTT connection failed ({error}); reconnecting");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let topic = publish.topic.clone();
        let payload: Option<Value> = serde_json::from_slice(&publish.payload).ok();
        let Some(payload) = payload.filter(|p| p["eventId"].is_string() && p["jobId"].is_string())
        else {
            writeln!(out, "SKIPPED {topic}: not a mirror event")?;
            continue;
        };
        if watch
            .job
            .is_some_and(|job| payload["jobId"] != job.to_string())
        {
            continue;
        }
        let event_id = payload["eventId"].as_str().unwrap_or_default().to_owned();
        if !seen.insert(event_id) {
            continue;
        }
        shown += 1;
        if watch.json {
            writeln!(
                out,
                "{}",
                serde_json::json!({"topic": topic, "payload": payload})
            )?;
        } else {
            writeln!(out, "{topic}")?;
            writeln!(out, "{}", String::from_utf8_lossy(&publish.payload))?;
        }
        out.flush()?;
    }
}

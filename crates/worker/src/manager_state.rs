//! The Manager mode's connection to the Manager's MongoDB (issue 35): the driver's client from
//! `MONGO_*` as the settings read them, its start-up probe and its readiness check.
//!
//! Upstream's gaps and what is chosen here:
//! - lib-commons hands the driver a CA read from `MONGO_TLS_CA_CERT` in memory; this driver
//!   takes a file, so the certificates are written once per process to a file of its own
//!   (created exclusively, mode 0600) in the temporary directory, and left for the driver to
//!   read whenever it opens a connection. They are public certificates, not a secret.
//! - `MONGO_MAX_POOL_SIZE` bounds the pool, as upstream does; the rest keeps the driver's
//!   defaults, and the application name says which process holds a connection.
//! - Writes are journaled (`j: true`) unless `MONGO_PARAMETERS` sets a write concern
//!   (`mongostate::journaled_writes`).

use std::future::Future;
use std::io::Write as _;
use std::path::PathBuf;
use std::pin::Pin;
use std::time::Duration;

use anyhow::Context;
use mongodb::bson::doc;
use mongodb::options::{ClientOptions, Tls, TlsOptions};
use secrecy::ExposeSecret;

use crate::config::MongoSettings;
use crate::dependencies::ProbeError;
use crate::health::{Check, CheckResult};

/// How long the probe and the readiness check wait for a server to be selected.
const ANSWER: Duration = Duration::from_secs(10);

/// The driver's client for `settings`, connecting lazily: nothing is asked of the server yet.
/// The hosts and the user are taught to redaction first, so no later driver text names them.
pub async fn client(settings: &MongoSettings) -> anyhow::Result<mongodb::Client> {
    let mut options = ClientOptions::parse(settings.uri.expose_secret())
        .await
        .map_err(|error| {
            anyhow::anyhow!(
                "MONGO_URI, MONGO_HOST, MONGO_PORT and MONGO_PARAMETERS do not make a MongoDB \
                 connection string the driver accepts: {}",
                contract::redact(&error.to_string())
            )
        })?;
    for host in &options.hosts {
        if let mongodb::options::ServerAddress::Tcp { host, .. } = host {
            contract::redaction::remember_host(host);
        }
    }
    if let Some(user) = options
        .credential
        .as_ref()
        .and_then(|c| c.username.as_ref())
    {
        contract::redaction::remember_user(user);
    }
    options.max_pool_size = Some(settings.max_pool_size);
    options.app_name = Some("fetcher-worker".to_owned());
    options.server_selection_timeout = Some(ANSWER);
    // Acknowledged state writes survive a server crash (durability.rs says why).
    mongostate::journaled_writes(&mut options);
    if let Some(pem) = &settings.tls_ca_pem {
        let mut tls = match options.tls.take() {
            Some(Tls::Enabled(tls)) => tls,
            _ => TlsOptions::default(),
        };
        tls.ca_file_path =
            Some(ca_file(pem).context("Failed to write MONGO_TLS_CA_CERT to a file")?);
        options.tls = Some(Tls::Enabled(tls));
    }
    mongodb::Client::with_options(options).map_err(|e| {
        anyhow::anyhow!(
            "Failed to set up the MongoDB client: {}",
            contract::redact(&e.to_string())
        )
    })
}

/// Writes the CA certificates to a new file of this process's own, readable by its owner only.
fn ca_file(pem: &[u8]) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = std::env::temp_dir().join(format!(
        "fetcher-worker-{}-{}-mongo-ca.pem",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    file.write_all(pem)?;
    file.sync_all()?;
    Ok(path)
}

/// Pings the server once: an authentication refused is the server refusing the Worker (the
/// start stops, naming what to fix); anything else is waited for.
pub(crate) async fn probe(client: &mongodb::Client) -> Result<(), ProbeError> {
    match ping(client).await {
        Ok(()) => Ok(()),
        Err(error) if refused(&error) => Err(ProbeError::Refused {
            reason: contract::redact(&error.to_string()),
            fix: "fix MONGO_USER or MONGO_PASSWORD, or the authSource of MONGO_PARAMETERS"
                .to_owned(),
        }),
        Err(error) => Err(ProbeError::Unreachable(contract::redact(
            &error.to_string(),
        ))),
    }
}

/// An answer that waiting does not change: the login refused (`ErrorKind::Authentication`,
/// or the server's `AuthenticationFailed`, code 18).
fn refused(error: &mongodb::error::Error) -> bool {
    match error.kind.as_ref() {
        mongodb::error::ErrorKind::Authentication { .. } => true,
        mongodb::error::ErrorKind::Command(command) => command.code == 18,
        _ => false,
    }
}

async fn ping(client: &mongodb::Client) -> mongodb::error::Result<()> {
    client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .map(drop)
}

/// `/readyz`'s check of the Manager's MongoDB, named as upstream's Worker names it.
pub struct MongoDb(pub mongodb::Client);

impl Check for MongoDb {
    fn name(&self) -> &'static str {
        "mongodb"
    }

    fn check(&self) -> Pin<Box<dyn Future<Output = CheckResult> + Send + '_>> {
        Box::pin(async move {
            ping(&self.0)
                .await
                .map_err(|e| contract::redact(&e.to_string()))
        })
    }
}

//! Connecting to SQL Server: tiberius' configuration from a connection's settings, and one
//! client per datasource read over TCP.
//!
//! TLS follows the connection's `SSLMODE`, as upstream maps it: `disable` and `prefer` encrypt
//! the login only (TDS `ENCRYPT_OFF`: the password never crosses in the clear, the rows do);
//! `require` encrypts the whole session without checking the certificate (upstream's
//! `encrypt=true&TrustServerCertificate=true`); `verify-ca` and `verify-full` encrypt the whole
//! session and check the certificate against the system roots, or the `sslrootcert` file.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tiberius::{AuthMethod, Client, Config, EncryptionLevel};
use tokio::net::TcpStream;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

use crate::connection::{ConnectionConfig, SslMode};
use crate::error::{EngineError, Result};

/// A client on one TCP connection.
pub(crate) type SqlClient = Client<Compat<TcpStream>>;

/// Where and how to connect: the driver's configuration, which holds the password, so its
/// `Debug` says nothing.
#[derive(Clone)]
pub(crate) struct Target {
    config: Arc<Config>,
    connect_timeout: Duration,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Target(<redacted>)")
    }
}

impl Target {
    pub(crate) fn new(connection: &ConnectionConfig, connect_timeout: Duration) -> Result<Target> {
        Ok(Target {
            config: Arc::new(config(connection)?),
            connect_timeout,
        })
    }

    /// A new client, logged in, within the connect timeout.
    pub(crate) async fn connect(&self, connection: &str) -> Result<SqlClient> {
        let config = (*self.config).clone();
        let connecting = async {
            let tcp = TcpStream::connect(config.get_addr())
                .await
                .map_err(|e| connect_error(connection, &e, crate::transient::io_kind(e.kind())))?;
            tcp.set_nodelay(true)
                .map_err(|e| connect_error(connection, &e, false))?;
            Client::connect(config, tcp.compat_write())
                .await
                .map_err(|e| connect_error(connection, &e, crate::transient::sqlserver(&e)))
        };
        tokio::time::timeout(self.connect_timeout, connecting)
            .await
            .map_err(|_| EngineError::Connect {
                connection: connection.to_owned(),
                detail: "timed out".to_owned(),
                transient: true,
            })?
    }
}

/// tiberius' configuration of a connection; options other than `sslrootcert` and
/// `application_name` are refused.
pub(crate) fn config(connection: &ConnectionConfig) -> Result<Config> {
    let mut config = Config::new();
    config.host(&connection.host);
    config.port(connection.port);
    if !connection.database.is_empty() {
        config.database(&connection.database);
    }
    config.authentication(AuthMethod::sql_server(
        &connection.user,
        connection.password.expose(),
    ));
    config.application_name("fetcher-worker");
    let mut root = None;
    for (key, value) in &connection.options {
        match key.as_str() {
            "sslrootcert" | "ssl-ca" => root = Some(value.clone()),
            "application_name" => config.application_name(value),
            _ => {
                return Err(connection.invalid(format!(
                    "option {key:?} is not supported for SQL Server (sslrootcert, application_name)"
                )))
            }
        }
    }
    match connection.ssl_mode {
        SslMode::Disable | SslMode::Prefer => {
            // Login-only TLS: the server's certificate protects nothing after the login, and
            // servers ship self-signed ones for it.
            config.encryption(EncryptionLevel::Off);
            config.trust_cert();
        }
        SslMode::Require => {
            config.encryption(EncryptionLevel::Required);
            config.trust_cert();
        }
        SslMode::VerifyCa | SslMode::VerifyFull => {
            config.encryption(EncryptionLevel::Required);
            if let Some(root) = root {
                config.trust_cert_ca(root);
            }
        }
    }
    Ok(config)
}

fn connect_error(connection: &str, error: &dyn fmt::Display, transient: bool) -> EngineError {
    EngineError::Connect {
        connection: connection.to_owned(),
        detail: contract::redact(&error.to_string()),
        transient,
    }
}

/// A query error, redacted.
pub(crate) fn query_error(connection: &str, error: &tiberius::error::Error) -> EngineError {
    EngineError::Query {
        connection: connection.to_owned(),
        detail: contract::redact(&error.to_string()),
        transient: crate::transient::sqlserver(error),
    }
}

//! Never sending a datasource password in the clear unless `sslmode=disable` was chosen.
//!
//! With `prefer` (the default, and libpq's `allow`), both drivers fall back to a plain
//! connection when the server has no TLS, and then answer whatever authentication the server
//! asks for: sqlx-postgres sends the password itself to `AuthenticationCleartextPassword`
//! (`sqlx-postgres-0.8.6/src/connection/establish.rs`, `Authentication::CleartextPassword`), and
//! sqlx-mysql sends it NUL-terminated when the server's *initial* handshake names
//! `mysql_clear_password` (`sqlx-mysql-0.8.6/src/connection/auth.rs`, `scramble`; only an
//! auth *switch* to that plugin is refused unless `enable_cleartext_plugin`, which this engine
//! never sets). Neither driver can be told to refuse, so before a pool is built for such a
//! connection the server is probed over raw TCP, without a password (SQL Server too, though
//! tiberius always encrypts its login: there the probe only upgrades `prefer` to a fully
//! encrypted session when the server can encrypt):
//!
//! - The server offers TLS: the pool is built with `require` instead of `prefer`, so a later
//!   connection that is suddenly refused TLS fails instead of falling back to plain (SQL
//!   Server: the whole session is encrypted, not only the login).
//! - It does not, and asks for a cleartext password: the job fails with
//!   [`CLEARTEXT_REFUSED`].
//! - It does not, and asks for anything else (MD5, SCRAM, native or SHA-2 scrambles, no
//!   password at all): the pool keeps `prefer`, and the probe runs again before every job,
//!   because those connections would follow a server reconfigured to cleartext.
//!
//! A probe is one extra TCP connection that ends during authentication (PostgreSQL may log an
//! EOF during the TLS handshake; MySQL counts an aborted connect, reset by the real login that
//! follows). Only `prefer` connections with a password are probed. An active attacker on a
//! network without TLS can still answer the probe and the real connection differently: `prefer`
//! never protects against one, and `require` or stricter is the only setting that does.

mod mysql;
mod postgres;
mod sqlserver;

use std::time::Duration;

use crate::connection::{ConnectionConfig, DatasourceKind, SslMode};
use crate::error::{EngineError, Result};

/// The error text of a refused connection.
pub(crate) const CLEARTEXT_REFUSED: &str = "the server asks for a cleartext password over an \
     unencrypted connection; enable TLS on the server or set sslmode=disable explicitly";

/// What a probe learnt about the server, before any password was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offer {
    /// The server accepts TLS.
    Tls,
    /// No TLS, and the server asks for the password itself.
    PlainCleartext,
    /// No TLS, and some other authentication (or an error the driver will report itself).
    PlainOther,
}

/// What the pool of a connection may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing to check: not `prefer`, or no password.
    Unchecked,
    /// The server has TLS: connect with `require`.
    Encrypted,
    /// No TLS and no cleartext password: connect as configured, and check again next time.
    Unencrypted,
}

impl Verdict {
    /// The TLS mode the pool is built with.
    pub(crate) fn ssl_mode(self, configured: SslMode) -> SslMode {
        match self {
            Verdict::Encrypted => SslMode::Require,
            Verdict::Unchecked | Verdict::Unencrypted => configured,
        }
    }

    /// Whether the server must be probed again before the pool is used next.
    pub(crate) fn recheck(self) -> bool {
        self == Verdict::Unencrypted
    }
}

/// Probes the server of `config` when its TLS mode could let the driver send the password in
/// the clear, and refuses when it would. `timeout` bounds the whole probe.
pub(crate) async fn check(config: &ConnectionConfig, timeout: Duration) -> Result<Verdict> {
    if config.ssl_mode != SslMode::Prefer || config.password.is_empty() {
        return Ok(Verdict::Unchecked);
    }
    let probe = async {
        match config.kind {
            DatasourceKind::Postgres => {
                postgres::probe(&config.host, config.port, &config.user, &config.database).await
            }
            DatasourceKind::MySql => mysql::probe(&config.host, config.port).await,
            DatasourceKind::SqlServer => sqlserver::probe(&config.host, config.port).await,
            _ => Ok(Offer::PlainOther),
        }
    };
    let offer = match tokio::time::timeout(timeout, probe).await {
        Ok(Ok(offer)) => offer,
        Ok(Err(error)) => return Err(unreachable(config, &error.to_string())),
        Err(_) => return Err(unreachable(config, "timed out")),
    };
    match offer {
        Offer::Tls => Ok(Verdict::Encrypted),
        Offer::PlainOther => Ok(Verdict::Unencrypted),
        Offer::PlainCleartext => Err(EngineError::Connect {
            connection: config.name.clone(),
            detail: CLEARTEXT_REFUSED.to_owned(),
            transient: false,
        }),
    }
}

fn unreachable(config: &ConnectionConfig, detail: &str) -> EngineError {
    EngineError::Connect {
        connection: config.name.clone(),
        detail: format!(
            "checking the server's TLS support failed: {}",
            contract::redact(detail)
        ),
        // The probe could not reach the server, or it did not answer in time.
        transient: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::Password;

    fn config(ssl_mode: SslMode, password: &str) -> ConnectionConfig {
        ConnectionConfig {
            name: "ledger".to_owned(),
            kind: DatasourceKind::Postgres,
            // Never contacted: every case here is decided before a probe.
            host: "probe.invalid".to_owned(),
            port: 1,
            database: "ledger".to_owned(),
            user: "reader".to_owned(),
            password: Password::new(password),
            ssl_mode,
            options: Default::default(),
            schemas: None,
        }
    }

    #[tokio::test]
    async fn only_prefer_with_a_password_is_probed() {
        let timeout = Duration::from_secs(1);
        for mode in [
            SslMode::Disable,
            SslMode::Require,
            SslMode::VerifyCa,
            SslMode::VerifyFull,
        ] {
            let verdict = check(&config(mode, "pw"), timeout).await.unwrap();
            assert_eq!(verdict, Verdict::Unchecked, "{mode}");
        }
        let verdict = check(&config(SslMode::Prefer, ""), timeout).await.unwrap();
        assert_eq!(verdict, Verdict::Unchecked);
    }

    #[test]
    fn a_tls_server_turns_prefer_into_require() {
        assert_eq!(
            Verdict::Encrypted.ssl_mode(SslMode::Prefer),
            SslMode::Require
        );
        assert_eq!(
            Verdict::Unencrypted.ssl_mode(SslMode::Prefer),
            SslMode::Prefer
        );
        assert!(Verdict::Unencrypted.recheck());
        assert!(!Verdict::Encrypted.recheck());
    }

    #[test]
    fn the_default_mode_is_never_disable() {
        // The exception for cleartext needs `disable` chosen explicitly: unset is `prefer`.
        assert_eq!(SslMode::default(), SslMode::Prefer);
    }
}

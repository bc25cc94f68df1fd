//! A connection's MongoDB client options.
//!
//! | setting | client option |
//! |---|---|
//! | `HOST`, `PORT` | the one seed (the driver discovers a replica set's other members unless `directConnection=true`) |
//! | `USER`, `PASSWORD` | SCRAM credentials; no user: no authentication |
//! | `DATABASE` | the default database, and the credentials' source unless `authSource` |
//! | `SSLMODE` | `disable` and `prefer`: no TLS (MongoDB has no TLS negotiation, and SCRAM never sends the password itself); `require`: TLS without checking the certificate; `verify-ca` and `verify-full`: a certificate signed by a trusted CA (`sslrootcert`, else the system's) and issued for the host (the driver's rustls TLS always checks the host name, so `verify-ca` is as strict as `verify-full`) |
//!
//! `OPTIONS` keys: `authSource`, `authMechanism` (`SCRAM-SHA-1` or `SCRAM-SHA-256`: a mechanism
//! that would send the password in the clear, `PLAIN`, is refused), `replicaSet`,
//! `directConnection` (`true`/`false`), `sslrootcert` (alias `tlsCAFile`), `appName`. Any other
//! key is an error.

use std::path::PathBuf;
use std::time::Duration;

use mongodb::options::{AuthMechanism, ClientOptions, Credential, ServerAddress, Tls, TlsOptions};

use crate::connection::{ConnectionConfig, SslMode};
use crate::error::Result;

/// The pool's limits, from the engine's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolLimits {
    pub max_connections: u32,
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
}

/// The client options of a MongoDB connection; errors name the offending option, never its
/// value.
pub(crate) fn client_options(
    config: &ConnectionConfig,
    limits: PoolLimits,
) -> Result<ClientOptions> {
    let mut options = ClientOptions::default();
    options.hosts = vec![ServerAddress::Tcp {
        host: config.host.clone(),
        port: Some(config.port),
    }];
    options.default_database = Some(config.database.clone());
    options.connect_timeout = Some(limits.connect_timeout);
    options.server_selection_timeout = Some(limits.connect_timeout);
    options.max_pool_size = Some(limits.max_connections.max(1));
    options.min_pool_size = Some(0);
    options.max_idle_time = Some(limits.idle_timeout);
    let mut source = None;
    let mut mechanism = None;
    let mut ca_file = None;
    for (key, value) in &config.options {
        match key.as_str() {
            "authSource" => source = Some(value.clone()),
            "authMechanism" => {
                mechanism = Some(match value.as_str() {
                    "SCRAM-SHA-1" => AuthMechanism::ScramSha1,
                    "SCRAM-SHA-256" => AuthMechanism::ScramSha256,
                    _ => {
                        return Err(config.invalid(
                            "option \"authMechanism\" must be SCRAM-SHA-1 or SCRAM-SHA-256"
                                .to_owned(),
                        ))
                    }
                })
            }
            "replicaSet" => options.repl_set_name = Some(value.clone()),
            "directConnection" => {
                options.direct_connection = Some(match value.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(config.invalid(
                            "option \"directConnection\" must be true or false".to_owned(),
                        ))
                    }
                })
            }
            "sslrootcert" | "tlsCAFile" => ca_file = Some(PathBuf::from(value)),
            "appName" => options.app_name = Some(value.clone()),
            _ => {
                return Err(config.invalid(format!(
                    "option {key:?} is not supported for MongoDB (authSource, authMechanism, \
                     replicaSet, directConnection, sslrootcert, appName)"
                )))
            }
        }
    }
    if !config.user.is_empty() {
        let mut credential = Credential::default();
        credential.username = Some(config.user.clone());
        if !config.password.is_empty() {
            credential.password = Some(config.password.expose().to_owned());
        }
        credential.source = Some(source.unwrap_or_else(|| config.database.clone()));
        credential.mechanism = mechanism;
        options.credential = Some(credential);
    }
    options.tls = Some(match config.ssl_mode {
        SslMode::Disable | SslMode::Prefer => Tls::Disabled,
        mode => {
            let mut tls = TlsOptions::default();
            tls.ca_file_path = ca_file;
            tls.allow_invalid_certificates = Some(mode == SslMode::Require);
            Tls::Enabled(tls)
        }
    });
    Ok(options)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::connection::{DatasourceKind, Password};

    fn config(options: &[(&str, &str)]) -> ConnectionConfig {
        ConnectionConfig {
            name: "crm".into(),
            kind: DatasourceKind::MongoDb,
            host: "db.internal".into(),
            port: 27017,
            database: "shop".into(),
            user: "reader".into(),
            password: Password::new("s3cret"),
            ssl_mode: SslMode::Prefer,
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            schemas: None,
        }
    }

    const LIMITS: PoolLimits = PoolLimits {
        max_connections: 4,
        idle_timeout: Duration::from_secs(60),
        connect_timeout: Duration::from_secs(5),
    };

    #[test]
    fn the_connection_becomes_one_seed_with_scram_credentials_on_its_database() {
        let options = client_options(&config(&[]), LIMITS).unwrap();
        assert_eq!(options.hosts.len(), 1);
        assert_eq!(options.hosts[0].to_string(), "db.internal:27017");
        let credential = options.credential.unwrap();
        assert_eq!(credential.username.as_deref(), Some("reader"));
        assert_eq!(credential.password.as_deref(), Some("s3cret"));
        assert_eq!(credential.source.as_deref(), Some("shop"));
        assert!(matches!(options.tls, Some(Tls::Disabled)));
        assert_eq!(options.max_pool_size, Some(4));
    }

    #[test]
    fn options_set_the_source_mechanism_and_tls_and_unknown_ones_are_refused() {
        let mut c = config(&[
            ("authSource", "admin"),
            ("authMechanism", "SCRAM-SHA-256"),
            ("directConnection", "true"),
            ("sslrootcert", "/etc/ca.pem"),
        ]);
        c.ssl_mode = SslMode::VerifyFull;
        let options = client_options(&c, LIMITS).unwrap();
        let credential = options.credential.unwrap();
        assert_eq!(credential.source.as_deref(), Some("admin"));
        assert_eq!(credential.mechanism, Some(AuthMechanism::ScramSha256));
        assert_eq!(options.direct_connection, Some(true));
        let Some(Tls::Enabled(tls)) = options.tls else {
            panic!("TLS")
        };
        assert_eq!(tls.ca_file_path, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(tls.allow_invalid_certificates, Some(false));

        for bad in [
            ("authMechanism", "PLAIN"),
            ("directConnection", "yes"),
            ("tlsInsecure", "true"),
        ] {
            let error = client_options(&config(&[bad]), LIMITS)
                .unwrap_err()
                .to_string();
            assert!(error.contains(bad.0), "{error}");
            assert!(
                !error.contains("s3cret") && !error.contains("db.internal"),
                "{error}"
            );
        }
    }
}

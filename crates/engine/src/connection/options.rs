//! The `key=value` options text, and a connection's sqlx connect options per driver.

use std::collections::BTreeMap;

use sqlx::mysql::MySqlConnectOptions;
use sqlx::postgres::PgConnectOptions;
use sqlx::ConnectOptions as _;

use super::ConnectionConfig;
use crate::error::Result;

/// Why an options text could not be read. Names positions and keys, never a value (an option
/// value may be a secret, a client key's path say).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidOptions(String);

/// Reads `key=value` pairs separated by `&` or whitespace (see the module docs). Empty pairs
/// (`a=1&&b=2`, trailing `&`) are skipped; the value is everything after the first `=`.
pub fn parse_options(text: &str) -> Result<BTreeMap<String, String>, InvalidOptions> {
    let mut options = BTreeMap::new();
    let pairs = text
        .split(|c: char| c == '&' || c.is_ascii_whitespace())
        .filter(|pair| !pair.is_empty());
    for (index, pair) in pairs.enumerate() {
        let position = index + 1;
        let Some((key, value)) = pair.split_once('=') else {
            return Err(InvalidOptions(format!(
                "option {position} is not a key=value pair"
            )));
        };
        if key.is_empty() {
            return Err(InvalidOptions(format!(
                "option {position} has an empty key"
            )));
        }
        if options.insert(key.to_owned(), value.to_owned()).is_some() {
            return Err(InvalidOptions(format!("option {key:?} is given twice")));
        }
    }
    Ok(options)
}

/// The text [`parse_options`] reads back into the same map, or an error when a key or value
/// cannot be written in that format.
pub(crate) fn format_options(options: &BTreeMap<String, String>) -> Result<String, InvalidOptions> {
    let mut text = String::new();
    for (key, value) in options {
        let breaks = |s: &str| s.contains(|c: char| c == '&' || c.is_ascii_whitespace());
        if key.is_empty() || key.contains('=') || breaks(key) {
            return Err(InvalidOptions(format!(
                "option key {key:?} cannot be written as key=value"
            )));
        }
        if breaks(value) {
            return Err(InvalidOptions(format!(
                "the value of option {key:?} contains `&` or whitespace"
            )));
        }
        if !text.is_empty() {
            text.push('&');
        }
        text.push_str(key);
        text.push('=');
        text.push_str(value);
    }
    Ok(text)
}

impl ConnectionConfig {
    /// The PostgreSQL connect options: host, port, database, user, password, TLS mode, and the
    /// options of the module docs (`sslrootcert`, `sslcert`, `sslkey`, `application_name`; every
    /// other key a server run-time parameter, except the ones the engine sets itself:
    /// `search_path`, `default_transaction_read_only`, `transaction_read_only`).
    ///
    /// The password file (`~/.pgpass`) is never read, and the password is always set (empty when
    /// there is none) so a `PGPASSWORD` of the Worker's own environment can never be sent to a
    /// datasource's host.
    pub fn pg_options(&self) -> Result<PgConnectOptions> {
        let mut options = PgConnectOptions::new_without_pgpass()
            .host(&self.host)
            .port(self.port)
            .database(&self.database)
            .username(&self.user)
            .password(self.password.expose())
            .ssl_mode(self.ssl_mode.to_postgres())
            // sqlx logs a statement slower than 1 s at WARN with its text: an extraction is slow
            // by nature, and its text holds the job's filter values.
            .disable_statement_logging();
        let mut parameters = Vec::new();
        for (key, value) in &self.options {
            options = match key.as_str() {
                "sslrootcert" => options.ssl_root_cert(value),
                "sslcert" => options.ssl_client_cert(value),
                "sslkey" => options.ssl_client_key(value),
                "application_name" => options.application_name(value),
                _ if is_engine_parameter(key) => {
                    return Err(self.invalid(format!(
                        "option {key:?} is set by the engine \
                         (search_path = pg_catalog, pg_temp; read-only sessions)"
                    )))
                }
                _ if is_parameter_name(key) => {
                    // The server splits its startup `options` at spaces and unescapes
                    // backslashes; values hold no spaces, so only backslashes need escaping.
                    parameters.push((key, value.replace('\\', "\\\\")));
                    options
                }
                _ => {
                    return Err(
                        self.invalid(format!("option {key:?} is not a PostgreSQL parameter name"))
                    )
                }
            };
        }
        if !parameters.is_empty() {
            options = options.options(parameters);
        }
        Ok(options)
    }

    /// The MySQL connect options: host, port, database, user, password, TLS mode, and the
    /// options of the module docs (`ssl-ca`/`sslrootcert`, `ssl-cert`/`sslcert`,
    /// `ssl-key`/`sslkey`, `collation`; any other key is an error). The character set stays
    /// `utf8mb4` and the session time zone UTC, which the value mapping relies on.
    pub fn mysql_options(&self) -> Result<MySqlConnectOptions> {
        let mut options = MySqlConnectOptions::new()
            .host(&self.host)
            .port(self.port)
            .database(&self.database)
            .username(&self.user)
            .ssl_mode(self.ssl_mode.to_mysql())
            .disable_statement_logging();
        if !self.password.is_empty() {
            options = options.password(self.password.expose());
        }
        for (key, value) in &self.options {
            options = match key.as_str() {
                "ssl-ca" | "ssl_ca" | "sslrootcert" => options.ssl_ca(value),
                "ssl-cert" | "ssl_cert" | "sslcert" => options.ssl_client_cert(value),
                "ssl-key" | "ssl_key" | "sslkey" => options.ssl_client_key(value),
                "collation" => options.collation(value),
                _ => {
                    return Err(self.invalid(format!(
                        "option {key:?} is not supported for MySQL \
                         (ssl-ca, ssl-cert, ssl-key, collation)"
                    )))
                }
            };
        }
        Ok(options)
    }
}

/// The session parameters the engine sets on every PostgreSQL connection and that an option
/// must not override: `search_path` (so nothing unqualified resolves to a user's schema) and
/// the read-only defaults. Parameter names are case-insensitive on the server.
fn is_engine_parameter(key: &str) -> bool {
    [
        "search_path",
        "default_transaction_read_only",
        "transaction_read_only",
    ]
    .iter()
    .any(|reserved| key.eq_ignore_ascii_case(reserved))
}

/// A PostgreSQL configuration parameter name: `work_mem`, or a custom `myext.setting`.
fn is_parameter_name(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connection::{DatasourceKind, Password, SslMode};

    fn config(kind: DatasourceKind, options: &str) -> ConnectionConfig {
        ConnectionConfig {
            name: "ledger".to_owned(),
            kind,
            host: "db.internal".to_owned(),
            port: 6543,
            database: "ledger".to_owned(),
            user: "reader".to_owned(),
            password: Password::new("s3cret-sentinel"),
            ssl_mode: SslMode::VerifyFull,
            options: parse_options(options).unwrap(),
            schemas: None,
        }
    }

    #[test]
    fn pairs_split_at_ampersands_and_whitespace() {
        let options = parse_options("a=1&b=2 c=3\td=x=y&&").unwrap();
        let expected: Vec<(&str, &str)> = vec![("a", "1"), ("b", "2"), ("c", "3"), ("d", "x=y")];
        let got: Vec<(&str, &str)> = options
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(got, expected);
        assert!(parse_options("").unwrap().is_empty());
        assert_eq!(parse_options("empty=").unwrap()["empty"], "");
    }

    #[test]
    fn malformed_options_are_rejected_without_echoing_values() {
        let error = parse_options("a=1&hunter2").unwrap_err();
        assert_eq!(error.to_string(), "option 2 is not a key=value pair");
        assert!(parse_options("=1").is_err());
        let error = parse_options("a=1&a=secret-value").unwrap_err();
        assert!(!error.to_string().contains("secret-value"));
    }

    #[test]
    fn formatted_options_parse_back() {
        let options = parse_options("sslrootcert=/ca.pem&statement_timeout=30s&x=a=b").unwrap();
        let text = format_options(&options).unwrap();
        assert_eq!(text, "sslrootcert=/ca.pem&statement_timeout=30s&x=a=b");
        assert_eq!(parse_options(&text).unwrap(), options);
    }

    #[test]
    fn options_that_cannot_be_written_are_rejected() {
        let mut options = BTreeMap::new();
        options.insert("k".to_owned(), "a b".to_owned());
        assert!(format_options(&options).is_err());
        let mut options = BTreeMap::new();
        options.insert("k=v".to_owned(), "a".to_owned());
        assert!(format_options(&options).is_err());
    }

    #[test]
    fn postgres_options_carry_the_connection() {
        let config = config(
            DatasourceKind::Postgres,
            "statement_timeout=30s&work_mem=8MB&application_name=fetcher",
        );
        let options = config.pg_options().unwrap();
        assert_eq!(options.get_host(), "db.internal");
        assert_eq!(options.get_port(), 6543);
        assert_eq!(options.get_database(), Some("ledger"));
        assert_eq!(options.get_username(), "reader");
        assert!(matches!(
            options.get_ssl_mode(),
            sqlx::postgres::PgSslMode::VerifyFull
        ));
        assert_eq!(options.get_application_name(), Some("fetcher"));
        let parameters = options.get_options().unwrap();
        assert!(parameters.contains("-c work_mem=8MB"), "{parameters}");
        assert!(
            parameters.contains("-c statement_timeout=30s"),
            "{parameters}"
        );
    }

    #[test]
    fn postgres_rejects_keys_that_are_not_parameter_names() {
        let error = config(DatasourceKind::Postgres, "bad-key=1")
            .pg_options()
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "connection ledger: option \"bad-key\" is not a PostgreSQL parameter name"
        );
    }

    #[test]
    fn postgres_refuses_the_parameters_the_engine_sets_itself() {
        for option in [
            "search_path=sales",
            "SEARCH_PATH=sales",
            "Search_Path=pg_catalog",
            "default_transaction_read_only=off",
            "transaction_read_only=off",
        ] {
            let error = config(DatasourceKind::Postgres, option)
                .pg_options()
                .unwrap_err();
            let key = option.split('=').next().unwrap();
            assert_eq!(
                error.to_string(),
                format!(
                    "connection ledger: option {key:?} is set by the engine \
                     (search_path = pg_catalog, pg_temp; read-only sessions)"
                ),
            );
        }
    }

    #[test]
    fn mysql_options_carry_the_connection() {
        let config = config(
            DatasourceKind::MySql,
            "ssl-ca=/ca.pem&collation=utf8mb4_unicode_ci",
        );
        let options = config.mysql_options().unwrap();
        assert_eq!(options.get_host(), "db.internal");
        assert_eq!(options.get_port(), 6543);
        assert_eq!(options.get_database(), Some("ledger"));
        assert_eq!(options.get_username(), "reader");
        assert_eq!(options.get_collation(), Some("utf8mb4_unicode_ci"));
        assert!(matches!(
            options.get_ssl_mode(),
            sqlx::mysql::MySqlSslMode::VerifyIdentity
        ));
    }

    #[test]
    fn mysql_rejects_unknown_options() {
        let error = config(DatasourceKind::MySql, "timezone=SYSTEM")
            .mysql_options()
            .unwrap_err();
        assert!(error
            .to_string()
            .contains("\"timezone\" is not supported for MySQL"));
    }

    #[test]
    fn validate_checks_the_driver_options_of_supported_kinds_only() {
        assert!(config(DatasourceKind::MySql, "bogus=1").validate().is_err());
        assert!(config(DatasourceKind::Postgres, "ok=1").validate().is_ok());
        assert!(config(DatasourceKind::MongoDb, "bogus=1")
            .validate()
            .is_err());
        assert!(config(DatasourceKind::SqlServer, "bogus=1")
            .validate()
            .is_err());
        assert!(config(
            DatasourceKind::SqlServer,
            "sslrootcert=/ca.pem&application_name=x"
        )
        .validate()
        .is_ok());
        assert!(config(DatasourceKind::Oracle, "bogus=1").validate().is_ok());
    }

    #[test]
    fn unsupported_kinds_fail_with_a_clear_message() {
        let error = config(DatasourceKind::Oracle, "")
            .ensure_supported()
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "connection ledger: datasource type ORACLE is not supported"
        );
        assert!(config(DatasourceKind::MySql, "").ensure_supported().is_ok());
        assert!(config(DatasourceKind::SqlServer, "")
            .ensure_supported()
            .is_ok());
    }

    #[test]
    fn debug_of_a_config_shows_no_password() {
        let text = format!("{:?}", config(DatasourceKind::Postgres, ""));
        assert!(!text.contains("s3cret-sentinel"), "{text}");
        assert!(text.contains("Password(<redacted>)"), "{text}");
    }
}

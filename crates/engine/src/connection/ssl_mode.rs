//! TLS modes, read from libpq's and MySQL's spellings and mapped to each driver's.

use std::fmt;
use std::str::FromStr;

use sqlx::mysql::MySqlSslMode;
use sqlx::postgres::PgSslMode;

/// How a connection uses TLS, from weakest to strictest.
///
/// Parsed case-insensitively, `_` and `-` alike, from either family of spellings:
///
/// | mode | libpq | MySQL |
/// |---|---|---|
/// | `Disable` | `disable` | `DISABLED` |
/// | `Prefer` | `prefer`, `allow` | `PREFERRED` |
/// | `Require` | `require` | `REQUIRED` |
/// | `VerifyCa` | `verify-ca` | `VERIFY_CA` |
/// | `VerifyFull` | `verify-full` | `VERIFY_IDENTITY` |
///
/// `allow` (plain first, TLS if the server insists) is read as `prefer` (TLS first, plain if
/// the server has none): both accept either, and trying TLS first never weakens a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum SslMode {
    Disable,
    /// TLS when the server offers it; the default of libpq and of MySQL clients.
    #[default]
    Prefer,
    /// TLS, without checking the server's certificate.
    Require,
    /// TLS, certificate signed by a trusted CA.
    VerifyCa,
    /// TLS, trusted certificate issued for the host name.
    VerifyFull,
}

impl SslMode {
    /// The libpq spelling, as written to the `ssl_mode` column.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    pub fn to_postgres(self) -> PgSslMode {
        match self {
            SslMode::Disable => PgSslMode::Disable,
            SslMode::Prefer => PgSslMode::Prefer,
            SslMode::Require => PgSslMode::Require,
            SslMode::VerifyCa => PgSslMode::VerifyCa,
            SslMode::VerifyFull => PgSslMode::VerifyFull,
        }
    }

    pub fn to_mysql(self) -> MySqlSslMode {
        match self {
            SslMode::Disable => MySqlSslMode::Disabled,
            SslMode::Prefer => MySqlSslMode::Preferred,
            SslMode::Require => MySqlSslMode::Required,
            SslMode::VerifyCa => MySqlSslMode::VerifyCa,
            SslMode::VerifyFull => MySqlSslMode::VerifyIdentity,
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text is not a TLS mode of libpq or MySQL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not an SSL mode (disable, prefer, require, verify-ca, verify-full)")]
pub struct UnknownSslMode(pub String);

impl FromStr for SslMode {
    type Err = UnknownSslMode;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mode = match text.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "disable" | "disabled" => SslMode::Disable,
            "allow" | "prefer" | "preferred" => SslMode::Prefer,
            "require" | "required" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" | "verify-identity" => SslMode::VerifyFull,
            _ => return Err(UnknownSslMode(text.to_owned())),
        };
        Ok(mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libpq_spellings_parse() {
        let cases = [
            ("disable", SslMode::Disable),
            ("allow", SslMode::Prefer),
            ("prefer", SslMode::Prefer),
            ("require", SslMode::Require),
            ("verify-ca", SslMode::VerifyCa),
            ("verify-full", SslMode::VerifyFull),
        ];
        for (text, mode) in cases {
            assert_eq!(text.parse::<SslMode>(), Ok(mode), "{text}");
        }
    }

    #[test]
    fn mysql_spellings_parse() {
        let cases = [
            ("DISABLED", SslMode::Disable),
            ("PREFERRED", SslMode::Prefer),
            ("REQUIRED", SslMode::Require),
            ("VERIFY_CA", SslMode::VerifyCa),
            ("VERIFY_IDENTITY", SslMode::VerifyFull),
        ];
        for (text, mode) in cases {
            assert_eq!(text.parse::<SslMode>(), Ok(mode), "{text}");
        }
    }

    #[test]
    fn case_and_separator_do_not_matter() {
        assert_eq!("Verify_Full".parse(), Ok(SslMode::VerifyFull));
        assert_eq!(" REQUIRE ".parse(), Ok(SslMode::Require));
    }

    #[test]
    fn unknown_spellings_are_rejected() {
        for text in ["", "true", "verify", "skip-verify"] {
            assert!(text.parse::<SslMode>().is_err(), "{text}");
        }
    }

    #[test]
    fn own_spelling_round_trips() {
        for mode in [
            SslMode::Disable,
            SslMode::Prefer,
            SslMode::Require,
            SslMode::VerifyCa,
            SslMode::VerifyFull,
        ] {
            assert_eq!(mode.as_str().parse(), Ok(mode));
        }
    }

    #[test]
    fn driver_modes_match() {
        assert!(matches!(
            SslMode::VerifyFull.to_postgres(),
            PgSslMode::VerifyFull
        ));
        assert!(matches!(
            SslMode::VerifyFull.to_mysql(),
            MySqlSslMode::VerifyIdentity
        ));
        assert!(matches!(
            SslMode::Disable.to_mysql(),
            MySqlSslMode::Disabled
        ));
    }
}

//! The datasource types of contract §6, their spellings and default ports.

use std::fmt;
use std::str::FromStr;

/// A datasource type. Every type of the contract resolves; PostgreSQL, MySQL, MongoDB and SQL
/// Server have a connector in this engine (Oracle does not) ([`is_supported`](Self::is_supported)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DatasourceKind {
    Postgres,
    MySql,
    MongoDb,
    SqlServer,
    Oracle,
}

impl DatasourceKind {
    /// Every type, in the contract's order.
    pub const ALL: [DatasourceKind; 5] = [
        DatasourceKind::Postgres,
        DatasourceKind::MySql,
        DatasourceKind::MongoDb,
        DatasourceKind::SqlServer,
        DatasourceKind::Oracle,
    ];

    /// The contract's spelling, as stored in the `type` column and read from `_TYPE`.
    pub fn as_str(self) -> &'static str {
        match self {
            DatasourceKind::Postgres => "POSTGRESQL",
            DatasourceKind::MySql => "MYSQL",
            DatasourceKind::MongoDb => "MONGODB",
            DatasourceKind::SqlServer => "SQL_SERVER",
            DatasourceKind::Oracle => "ORACLE",
        }
    }

    /// The server's conventional port, used when none is configured.
    pub fn default_port(self) -> u16 {
        match self {
            DatasourceKind::Postgres => 5432,
            DatasourceKind::MySql => 3306,
            DatasourceKind::MongoDb => 27017,
            DatasourceKind::SqlServer => 1433,
            DatasourceKind::Oracle => 1521,
        }
    }

    /// Whether this engine can extract from the type.
    pub fn is_supported(self) -> bool {
        matches!(
            self,
            DatasourceKind::Postgres
                | DatasourceKind::MySql
                | DatasourceKind::MongoDb
                | DatasourceKind::SqlServer
        )
    }
}

impl fmt::Display for DatasourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The text is not one of the contract's datasource types.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a datasource type (POSTGRESQL, MYSQL, MONGODB, SQL_SERVER, ORACLE)")]
pub struct UnknownKind(pub String);

impl FromStr for DatasourceKind {
    type Err = UnknownKind;

    /// The contract's spellings, case-insensitive, plus `POSTGRES` and `SQLSERVER`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let kind = match text.trim().to_ascii_uppercase().as_str() {
            "POSTGRESQL" | "POSTGRES" => DatasourceKind::Postgres,
            "MYSQL" => DatasourceKind::MySql,
            "MONGODB" => DatasourceKind::MongoDb,
            "SQL_SERVER" | "SQLSERVER" => DatasourceKind::SqlServer,
            "ORACLE" => DatasourceKind::Oracle,
            _ => return Err(UnknownKind(text.to_owned())),
        };
        Ok(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_from_its_own_spelling() {
        for kind in DatasourceKind::ALL {
            assert_eq!(kind.as_str().parse::<DatasourceKind>().unwrap(), kind);
        }
    }

    #[test]
    fn spellings_are_case_insensitive_with_two_aliases() {
        assert_eq!("postgresql".parse(), Ok(DatasourceKind::Postgres));
        assert_eq!("Postgres".parse(), Ok(DatasourceKind::Postgres));
        assert_eq!("MySql".parse(), Ok(DatasourceKind::MySql));
        assert_eq!("sqlserver".parse(), Ok(DatasourceKind::SqlServer));
        assert!("mariadb".parse::<DatasourceKind>().is_err());
        assert!("".parse::<DatasourceKind>().is_err());
    }

    #[test]
    fn every_kind_but_oracle_is_supported() {
        let supported: Vec<_> = DatasourceKind::ALL
            .into_iter()
            .filter(|k| k.is_supported())
            .collect();
        assert_eq!(
            supported,
            [
                DatasourceKind::Postgres,
                DatasourceKind::MySql,
                DatasourceKind::MongoDb,
                DatasourceKind::SqlServer
            ]
        );
    }

    #[test]
    fn default_ports_are_the_servers_conventional_ones() {
        assert_eq!(DatasourceKind::Postgres.default_port(), 5432);
        assert_eq!(DatasourceKind::MySql.default_port(), 3306);
    }
}

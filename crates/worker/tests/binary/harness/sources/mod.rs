//! Source databases of every kind the Worker reads, one per test on the shared servers, each
//! seeded by its test and reachable by the Worker as a datasource: [`SourceDb`] is what a kind
//! gives (its `DATASOURCE_<NAME>_*` variables, direct or through a proxy), so a test over several
//! kinds is a list of them.
//!
//! - [`mongo`]: [`MongoDb`], a MongoDB database, and the server's open cursors on it.
//! - [`mariadb`]: [`MariaDb`], a MySQL/MariaDB database.
//! - [`postgres`]: [`PgSource`], a PostgreSQL database, and its running statements.
//! - [`sqlserver`]: a private pysqlbridge (`testkit::sqlbridge::SqlBridge`), the SQL Server
//!   stand-in.

mod mariadb;
mod mongo;
mod postgres;
mod sqlserver;

use std::net::SocketAddr;

pub use postgres::PgSource;
pub use testkit::mariadb::MariaDb;
pub use testkit::mongo::MongoDb;

/// A test's own source database of one kind.
pub trait SourceDb {
    /// The Worker's variables defining datasource `name` on this database, reached at `addr`
    /// (a proxy in front of the server) or, `None`, at the server itself.
    fn datasource_at(&self, name: &str, addr: Option<SocketAddr>) -> Vec<(String, String)>;

    /// The Worker's variables defining datasource `name` on this database.
    fn datasource(&self, name: &str) -> Vec<(String, String)> {
        self.datasource_at(name, None)
    }
}

/// `DATASOURCE_<NAME>_<SETTING>` variables of datasource `name` (its group is the name in upper
/// case, and `CONFIG_NAME` keeps the name exactly).
fn group(name: &str, settings: &[(&str, String)]) -> Vec<(String, String)> {
    let prefix = format!("DATASOURCE_{}_", name.to_uppercase());
    std::iter::once(("CONFIG_NAME", name.to_owned()))
        .chain(settings.iter().map(|(k, v)| (*k, v.clone())))
        .map(|(setting, value)| (format!("{prefix}{setting}"), value))
        .collect()
}

/// Points `vars`' `_HOST` and `_PORT` at `addr` (a proxy in front of the server).
fn through(vars: &mut [(String, String)], addr: SocketAddr) {
    for (key, value) in vars {
        if key.ends_with("_HOST") {
            *value = addr.ip().to_string();
        } else if key.ends_with("_PORT") {
            *value = addr.port().to_string();
        }
    }
}

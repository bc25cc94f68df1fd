//! testkit's MySQL/MariaDB database per test ([`MariaDb`]) as one of a test's source databases,
//! reached directly or through a proxy.

use std::net::SocketAddr;

use testkit::mariadb::MariaDb;

use super::SourceDb;

impl SourceDb for MariaDb {
    fn datasource_at(&self, name: &str, addr: Option<SocketAddr>) -> Vec<(String, String)> {
        let mut vars = self.vars(&name.to_uppercase(), name, &[]);
        if let Some(addr) = addr {
            super::through(&mut vars, addr);
        }
        vars
    }
}

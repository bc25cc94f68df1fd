//! A private pysqlbridge (the SQL Server stand-in, [`SqlBridge`]) as one of a test's source
//! databases: its tables are fixed when it starts, and the Worker reaches it directly or through
//! a proxy in front of it.

use std::net::SocketAddr;

use testkit::sqlbridge::SqlBridge;

use super::SourceDb;

impl SourceDb for SqlBridge {
    fn datasource_at(&self, name: &str, addr: Option<SocketAddr>) -> Vec<(String, String)> {
        let mut vars = self.vars(&name.to_uppercase(), name, &[]);
        if let Some(addr) = addr {
            super::through(&mut vars, addr);
        }
        vars
    }
}

//! A private pysqlbridge (the SQL Server stand-in, [`SqlBridge`]) as one of a test's source
//! databases: its tables are fixed when it starts, and the Worker reaches it directly (the
//! stand-in is the test's own, so no proxy is needed).

use std::net::SocketAddr;

use testkit::sqlbridge::SqlBridge;

use super::SourceDb;

impl SourceDb for SqlBridge {
    fn datasource_at(&self, name: &str, addr: Option<SocketAddr>) -> Vec<(String, String)> {
        assert!(
            addr.is_none(),
            "a private pysqlbridge is reached directly, not through a proxy"
        );
        self.vars(&name.to_uppercase(), name, &[])
    }
}

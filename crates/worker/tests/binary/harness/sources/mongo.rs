//! testkit's MongoDB database per test ([`MongoDb`]) as one of a test's source databases,
//! reached directly or through a proxy.

use std::net::SocketAddr;

use testkit::mongo::MongoDb;

use super::SourceDb;

impl SourceDb for MongoDb {
    fn datasource_at(&self, name: &str, addr: Option<SocketAddr>) -> Vec<(String, String)> {
        let (host, port) = match addr {
            Some(addr) => (addr.ip().to_string(), addr.port()),
            None => {
                let (host, port) = self.host_port();
                (host.to_owned(), port)
            }
        };
        let mut settings = vec![
            ("TYPE", "MONGODB".to_owned()),
            ("HOST", host),
            ("PORT", port.to_string()),
            ("DATABASE", self.name.clone()),
            ("USER", String::new()),
            ("SSLMODE", "disable".to_owned()),
        ];
        if addr.is_some() {
            // The replica set advertises the server's own address: without this, the driver
            // would discover it and go around the proxy.
            settings.push(("OPTIONS", "directConnection=true".to_owned()));
        }
        super::group(name, &settings)
    }
}

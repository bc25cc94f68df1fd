//! What `submit` and `watch` share on the broker side: the URI (a secret: `--amqp-uri`,
//! `AMQP_URI`, else the Worker's `RABBITMQ_*` variables), the connection, and reading and
//! writing AMQP header values.

use std::time::Duration;

use anyhow::{anyhow, bail};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::uri::AMQPUri;
use lapin::{Connection, ConnectionProperties};

use crate::broker_env::{self, BrokerUri};

/// Where the broker is. The URI carries a password: it is never printed, not even in `--help`
/// (`hide_env_values`), nor in an error.
#[derive(clap::Args)]
pub struct BrokerArgs {
    /// AMQP URI of the broker. Default: built from the Worker's variables (RABBITMQ_URI, else
    /// RABBITMQ_HOST, RABBITMQ_PORT_AMQP, RABBITMQ_DEFAULT_USER, RABBITMQ_DEFAULT_PASS,
    /// RABBITMQ_VHOST), each defaulting as in the Worker: amqp://guest:***@127.0.0.1:5672/%2F.
    /// A flag is visible in the process list: prefer a variable when the URI holds a password.
    #[arg(long, value_name = "URI", env = "AMQP_URI", hide_env_values = true)]
    amqp_uri: Option<String>,

    /// Seconds to wait for the connection, and for the broker's answers.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    broker_timeout: u64,
}

impl BrokerArgs {
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.broker_timeout.max(1))
    }

    /// `--amqp-uri` or `AMQP_URI` when given, else the Worker's `RABBITMQ_*` variables.
    fn uri(&self) -> anyhow::Result<BrokerUri> {
        match self
            .amqp_uri
            .as_deref()
            .map(str::trim)
            .filter(|uri| !uri.is_empty())
        {
            Some(uri) => Ok(BrokerUri {
                uri: uri.to_owned(),
                source: "--amqp-uri or AMQP_URI",
            }),
            None => broker_env::from_vars(|name| std::env::var(name).ok()),
        }
    }

    /// Connects; `name` is the connection name the broker shows.
    pub async fn connect(&self, name: &str) -> anyhow::Result<Connection> {
        let BrokerUri { uri, source } = self.uri()?;
        // The parser's error quotes the URI, password included: it is dropped here.
        let uri: AMQPUri = uri.parse().map_err(|_| {
            anyhow!(
                "the AMQP URI (from {source}) does not parse; it is not shown because it may \
                 hold a password"
            )
        })?;
        let password = uri.authority.userinfo.password.clone();
        let properties = ConnectionProperties::default().with_connection_name(name.into());
        match tokio::time::timeout(self.timeout(), Connection::connect_uri(uri, properties)).await {
            Ok(Ok(connection)) => Ok(connection),
            Ok(Err(error)) => bail!(
                "Failed to connect to the broker (URI from {source}): {}",
                scrub(&error.to_string(), &password)
            ),
            Err(_) => bail!(
                "Failed to connect to the broker (URI from {source}) within {} s",
                self.timeout().as_secs()
            ),
        }
    }
}

/// A broker error's text without URIs, addresses or the password.
pub fn scrub(text: &str, password: &str) -> String {
    let text = contract::redact(text);
    if password.len() >= 3 {
        text.replace(password, "[redacted]")
    } else {
        text
    }
}

/// An AMQP long string header value.
pub fn long_string(value: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(value))
}

/// A header by exact name.
pub fn header<'a>(headers: Option<&'a FieldTable>, name: &str) -> Option<&'a AMQPValue> {
    headers.and_then(|table| table.inner().get(name))
}

/// A header as the signature rules see it (contract §3), read exactly as the Worker reads it.
pub use contract::envelope::amqp::header_value as signature_value;

/// A header that is a string (long or short), as UTF-8 text.
pub fn string_header<'a>(headers: Option<&'a FieldTable>, name: &str) -> Option<&'a str> {
    match header(headers, name)? {
        AMQPValue::LongString(s) => std::str::from_utf8(s.as_bytes()).ok(),
        AMQPValue::ShortString(s) => Some(s.as_str()),
        _ => None,
    }
}

/// A header that holds text in any form: a string, or a byte array (as CloudEvents binary-mode
/// attributes arrive, contract §8).
pub fn text_header<'a>(headers: Option<&'a FieldTable>, name: &str) -> Option<&'a str> {
    match header(headers, name)? {
        AMQPValue::ByteArray(bytes) => std::str::from_utf8(bytes.as_slice()).ok(),
        _ => string_header(headers, name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use contract::envelope::HeaderValue;
    use lapin::types::ByteArray;

    #[test]
    fn scrub_removes_uris_addresses_and_the_password() {
        let text = "connect to amqp://u:hunter22@10.0.0.7:5672 failed: hunter22 rejected";
        let scrubbed = scrub(text, "hunter22");
        assert!(!scrubbed.contains("hunter22"), "{scrubbed}");
        assert!(!scrubbed.contains("10.0.0.7"), "{scrubbed}");
    }

    #[test]
    fn text_headers_read_strings_and_byte_arrays_but_signature_values_only_strings() {
        let mut table = FieldTable::default();
        table.insert("a".into(), long_string("x"));
        table.insert("b".into(), AMQPValue::ByteArray(ByteArray::from(&b"y"[..])));
        let headers = Some(&table);
        assert_eq!(text_header(headers, "a"), Some("x"));
        assert_eq!(text_header(headers, "b"), Some("y"));
        assert_eq!(string_header(headers, "b"), None);
        assert_eq!(text_header(headers, "c"), None);
        let b = header(headers, "b").expect("b");
        assert_eq!(signature_value(b), HeaderValue::Other("byte array"));
    }
}

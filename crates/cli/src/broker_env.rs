//! The broker URI from the Worker's own `RABBITMQ_*` variables, for when `AMQP_URI` is not set,
//! read by the Worker's rule: a `RABBITMQ_URI` holding `://` is the whole URI; otherwise it is
//! the scheme (default `amqp`) and the URI is built from `RABBITMQ_HOST` (127.0.0.1),
//! `RABBITMQ_PORT_AMQP` (5672), `RABBITMQ_DEFAULT_USER` and `RABBITMQ_DEFAULT_PASS` (guest,
//! guest) and `RABBITMQ_VHOST` (`/`), with the user, the password and the vhost
//! percent-encoded. Blank values count as unset; values are trimmed. With none of them set,
//! the URI is `amqp://guest:guest@127.0.0.1:5672/%2F`, the Worker's default too.

use anyhow::bail;

pub const URI: &str = "RABBITMQ_URI";
pub const HOST: &str = "RABBITMQ_HOST";
pub const PORT: &str = "RABBITMQ_PORT_AMQP";
pub const USER: &str = "RABBITMQ_DEFAULT_USER";
pub const PASS: &str = "RABBITMQ_DEFAULT_PASS";
pub const VHOST: &str = "RABBITMQ_VHOST";

/// A URI and where it came from (for error messages, which never show the URI itself).
#[derive(Debug, PartialEq, Eq)]
pub struct BrokerUri {
    /// The URI; it may hold a password.
    pub uri: String,
    /// The variables it came from, named for the operator.
    pub source: &'static str,
}

/// The URI from the variables `get` returns (the process environment in `fetcherctl`).
pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<BrokerUri> {
    let var = |name: &str| {
        get(name)
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty())
    };
    let uri = var(URI);
    if let Some(uri) = uri.as_ref().filter(|uri| uri.contains("://")) {
        return Ok(BrokerUri {
            uri: uri.clone(),
            source: URI,
        });
    }
    let scheme = uri.unwrap_or_else(|| "amqp".to_owned());
    let host = var(HOST).unwrap_or_else(|| "127.0.0.1".to_owned());
    let port = match var(PORT) {
        None => 5672,
        Some(port) => match port.parse::<u16>() {
            Ok(port) => port,
            Err(_) => bail!("{PORT} must be a port number"),
        },
    };
    let user = var(USER).unwrap_or_else(|| "guest".to_owned());
    let pass = var(PASS).unwrap_or_else(|| "guest".to_owned());
    let vhost = var(VHOST).unwrap_or_else(|| "/".to_owned());
    Ok(BrokerUri {
        uri: contract::wire::broker_uri(&scheme, &host, port, &user, &pass, &vhost),
        source: "the RABBITMQ_* variables",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn uri(vars: &[(&str, &str)]) -> anyhow::Result<BrokerUri> {
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        from_vars(|name| vars.get(name).cloned())
    }

    #[test]
    fn no_variables_give_the_workers_default() {
        let broker = uri(&[]).expect("default");
        assert_eq!(broker.uri, "amqp://guest:guest@127.0.0.1:5672/%2F");
        assert_eq!(broker.source, "the RABBITMQ_* variables");
    }

    #[test]
    fn the_parts_are_used_and_encoded() {
        let broker = uri(&[
            (HOST, " rabbit.internal "),
            (PORT, "5673"),
            (USER, "fetcher"),
            (PASS, "p@ss:w/rd%"),
            (VHOST, "tenant/a"),
        ])
        .expect("parts");
        assert_eq!(
            broker.uri,
            "amqp://fetcher:p%40ss%3Aw%2Frd%25@rabbit.internal:5673/tenant%2Fa"
        );
    }

    #[test]
    fn a_uri_without_a_scheme_separator_is_the_scheme() {
        let broker = uri(&[(URI, "amqps"), (HOST, "h")]).expect("scheme");
        assert_eq!(broker.uri, "amqps://guest:guest@h:5672/%2F");
    }

    #[test]
    fn a_whole_uri_wins_over_the_parts() {
        let broker =
            uri(&[(URI, "amqp://u:p@x:1/v"), (HOST, "h"), (PASS, "other")]).expect("whole");
        assert_eq!(broker.uri, "amqp://u:p@x:1/v");
        assert_eq!(broker.source, URI);
    }

    #[test]
    fn blank_values_are_unset_and_a_bad_port_is_named() {
        let broker = uri(&[(URI, "  "), (HOST, ""), (PORT, " ")]).expect("blank");
        assert_eq!(broker.uri, "amqp://guest:guest@127.0.0.1:5672/%2F");
        for port in ["x", "-1", "65536"] {
            let error = uri(&[(PORT, port)]).expect_err(port).to_string();
            assert_eq!(error, "RABBITMQ_PORT_AMQP must be a port number");
        }
    }
}

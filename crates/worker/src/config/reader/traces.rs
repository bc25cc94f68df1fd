//! Traces (issue 37): upstream's switch `ENABLE_TELEMETRY` and the standard
//! `OTEL_EXPORTER_OTLP_*`, `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`, read with the
//! OpenTelemetry specification's meaning and checked at start. Every variable is read whatever
//! the switch says (so the reference holds the reader to its table); they are checked only when
//! it is on. `OTEL_EXPORTER_OTLP_HEADERS` holds credentials: no problem or log repeats a value
//! of it (nor its endpoint's, which may carry a token in its query).

use secrecy::SecretString;

use super::super::{TraceProtocol, TraceSettings};
use super::Reader;

/// OTLP/HTTP's standard local endpoint, when neither endpoint variable is set.
pub(in crate::config) const DEFAULT_ENDPOINT: &str = "http://localhost:4318";
/// The traces path the general endpoint is given (the specification's `/v1/traces`).
const TRACES_PATH: &str = "/v1/traces";
/// The service name when `OTEL_SERVICE_NAME` is unset.
pub(in crate::config) const DEFAULT_SERVICE_NAME: &str = "fetcher-worker";

pub(super) fn read(r: &mut Reader<'_>) -> Option<TraceSettings> {
    let enabled = r.flag("ENABLE_TELEMETRY", false);
    let general = r.get("OTEL_EXPORTER_OTLP_ENDPOINT");
    let traces = r.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let protocol = r.get("OTEL_EXPORTER_OTLP_PROTOCOL");
    let headers = r.raw("OTEL_EXPORTER_OTLP_HEADERS");
    let service_name = r.text("OTEL_SERVICE_NAME", DEFAULT_SERVICE_NAME);
    let resource = r.get("OTEL_RESOURCE_ATTRIBUTES");
    if !enabled {
        return None;
    }
    let protocol = match protocol.map(str::to_ascii_lowercase).as_deref() {
        None | Some("http/protobuf") => Some(TraceProtocol::Protobuf),
        Some("http/json") => Some(TraceProtocol::Json),
        Some("grpc") => {
            r.problem(
                "OTEL_EXPORTER_OTLP_PROTOCOL is grpc, which this Worker does not export over: \
                 use http/protobuf (the default) or http/json, with the collector's OTLP/HTTP \
                 port (4318)"
                    .into(),
            );
            None
        }
        Some(_) => {
            r.problem("OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json".into());
            None
        }
    };
    let endpoint = match (traces, general) {
        (Some(url), _) => endpoint(r, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url, false),
        (None, Some(url)) => endpoint(r, "OTEL_EXPORTER_OTLP_ENDPOINT", url, true),
        (None, None) => Some(format!("{DEFAULT_ENDPOINT}{TRACES_PATH}")),
    };
    let headers = match parse_pairs(&headers) {
        Ok(pairs) => pairs
            .into_iter()
            .filter_map(|(name, value)| {
                let fits = name.bytes().all(|b| b.is_ascii_graphic() && b != b':')
                    && value
                        .bytes()
                        .all(|b| b == b'\t' || (b' '..=b'~').contains(&b));
                if fits {
                    Some((name, SecretString::from(value)))
                } else {
                    r.problem(
                        "OTEL_EXPORTER_OTLP_HEADERS has a header whose name or value cannot be \
                         sent in HTTP (printable ASCII only; values are not shown)"
                            .into(),
                    );
                    None
                }
            })
            .collect(),
        Err(()) => {
            r.problem(
                "OTEL_EXPORTER_OTLP_HEADERS must be a comma-separated list of name=value \
                 (values percent-encoded; values are not shown)"
                    .into(),
            );
            Vec::new()
        }
    };
    let resource = match resource.map(parse_pairs).transpose() {
        Ok(pairs) => pairs.unwrap_or_default(),
        Err(()) => {
            r.problem(
                "OTEL_RESOURCE_ATTRIBUTES must be a comma-separated list of key=value \
                 (values percent-encoded)"
                    .into(),
            );
            Vec::new()
        }
    };
    Some(TraceSettings {
        endpoint: endpoint?,
        protocol: protocol?,
        headers,
        service_name,
        resource,
    })
}

/// An endpoint URL: `http[s]://host[:port][/path]`. The general one gets `/v1/traces` appended
/// (the specification's rule); the traces one is used as it is. Its value is never repeated.
fn endpoint(r: &mut Reader<'_>, name: &str, url: &str, general: bool) -> Option<String> {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        r.problem(format!(
            "{name} cannot be used: it must be an http:// or https:// URL"
        ));
        return None;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let port = match authority.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => {
            port.parse::<u16>().ok().filter(|p| *p > 0).map(Some)
        }
        _ => Some(None),
    };
    let host = authority
        .rsplit_once(':')
        .map_or(authority, |(host, _)| host);
    let bad_host = host.is_empty()
        || authority.contains('@')
        || host.contains(char::is_whitespace)
        || url.contains(char::is_whitespace);
    let Some(port) = port.filter(|_| !bad_host) else {
        r.problem(format!(
            "{name} must be a URL http[s]://host[:port][/path], with a port from 1 to 65535 and \
             no user information (the value is not shown)"
        ));
        return None;
    };
    if port == Some(4317) {
        r.warning(format!(
            "{name} names port 4317, OTLP's gRPC port; this Worker exports OTLP over HTTP, \
             whose port is 4318: spans sent there are likely refused."
        ));
    }
    if general {
        Some(format!("{}{TRACES_PATH}", url.trim_end_matches('/')))
    } else {
        Some(url.to_owned())
    }
}

/// `key=value,key=value` (the W3C baggage form the specification uses for headers and resource
/// attributes), values percent-decoded. An empty list is no pair.
fn parse_pairs(text: &str) -> Result<Vec<(String, String)>, ()> {
    text.split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(|item| {
            let (key, value) = item.split_once('=').ok_or(())?;
            let key = key.trim();
            if key.is_empty() {
                return Err(());
            }
            Ok((key.to_owned(), percent_decode(value.trim())?))
        })
        .collect()
}

/// `%XX` escapes to their bytes; the result must be UTF-8.
fn percent_decode(text: &str) -> Result<String, ()> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).ok_or(())?;
            let hex = std::str::from_utf8(hex).map_err(|_| ())?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| ())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_split_trimmed_and_percent_decoded() {
        assert_eq!(
            parse_pairs(" authorization=Bearer%20abc , x-tenant = acme ,").unwrap(),
            vec![
                ("authorization".to_owned(), "Bearer abc".to_owned()),
                ("x-tenant".to_owned(), "acme".to_owned()),
            ]
        );
        assert_eq!(parse_pairs("").unwrap(), vec![]);
        assert!(parse_pairs("novalue").is_err());
        assert!(parse_pairs("=value").is_err());
        assert!(parse_pairs("a=%zz").is_err());
        assert!(parse_pairs("a=%4").is_err());
    }
}

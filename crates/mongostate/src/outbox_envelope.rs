//! The version-1 envelope lib-streaming stores in an outbox row's `payload` (UPSTREAM-MANAGER
//! §4.3): written in Go's member order and escaping, and read as the relay validates it.
//!
//! Upstream's gaps and what is chosen here:
//! - Go embeds the event body as a `json.RawMessage`, which `json.Marshal` compacts and
//!   HTML-escapes; a relay then publishes the embedded bytes. [`envelope`] refuses a body that
//!   compaction would change, so the published body is the given body byte for byte.
//! - The relay's "canonical route key" and requirement checks are not spelt out in §4.3;
//!   [`Envelope::parse`] accepts this Worker's route (`<definition_key>.rabbitmq`, target
//!   [`TARGET`], requirement `required`), which is the only one Go's Fetcher emits.

use contract::json::GoTime;
use serde::Deserialize;
use serde_json::value::RawValue;
use uuid::Uuid;

use crate::outbox::{check_tenant, invalid, Emit};
use crate::{Error, Result};

/// The publish target Fetcher registers for job events.
pub const TARGET: &str = "fetcher-job-events-rabbitmq";
/// lib-streaming's limit on an event payload.
const MAX_PAYLOAD: usize = 1 << 20;

/// The row's `aggregate_id`: UUIDv5 (SHA-1, DNS namespace) of the event's partition key, the
/// tenant (`ls:internal/producer/publish_outbox_route.go:135-157`).
pub fn aggregate_id(tenant: &str) -> Uuid {
    Uuid::new_v5(&Uuid::NAMESPACE_DNS, tenant.as_bytes())
}

/// The envelope JSON stored in `payload`, in Go's member order and escaping (§4.3).
pub fn envelope(emit: &Emit<'_>) -> Result<String> {
    check_tenant(emit.tenant)?;
    if emit.body.len() > MAX_PAYLOAD {
        return Err(invalid(
            "the event body",
            "it is larger than 1 MiB".to_owned(),
        ));
    }
    if serde_json::from_str::<&RawValue>(emit.body).is_err() || !is_go_compact(emit.body) {
        return Err(invalid(
            "the event body",
            "it is not compact JSON as Go writes it".to_owned(),
        ));
    }
    let definition = emit.status.routing_key();
    let job = emit.job_id.hyphenated().to_string();
    let fields = [
        ("route_key", format!("{definition}.rabbitmq")),
        ("definition_key", definition.to_owned()),
        ("target", TARGET.to_owned()),
        ("transport", "rabbitmq".to_owned()),
    ];
    let mut out = String::from(r#"{"version":1"#);
    for (key, value) in &fields {
        out.push_str(&format!(",\"{key}\":{}", quote(value)));
    }
    out.push_str(&format!(
        r#","destination":{{"kind":"rabbitmq","name":{},"address":{}}}"#,
        quote(emit.exchange),
        quote(definition)
    ));
    out.push_str(&format!(
        r#","aggregate_id":"{}","requirement":"required""#,
        aggregate_id(emit.tenant)
    ));
    out.push_str(
        r#","policy":{"enabled":true,"direct":"skip","outbox":"always","dlq":"on_routable_failure"}"#,
    );
    let timestamp = GoTime::new(emit.at.naive_utc());
    let event = [
        ("TenantID", emit.tenant.to_owned()),
        ("ResourceType", "job".to_owned()),
        ("EventType", emit.status.as_str().to_owned()),
        ("EventID", contract::event::ce_id(emit.status, emit.job_id)),
        ("SchemaVersion", "1.0.0".to_owned()),
        ("Timestamp", timestamp.as_str().to_owned()),
        ("Source", emit.source.to_owned()),
        ("Subject", job),
        ("DataContentType", "application/json".to_owned()),
        ("DataSchema", String::new()),
    ];
    out.push_str(r#","event":{"#);
    for (n, (key, value)) in event.iter().enumerate() {
        let comma = if n == 0 { "" } else { "," };
        out.push_str(&format!("{comma}\"{key}\":{}", quote(value)));
    }
    out.push_str(r#","SystemEvent":false,"Payload":"#);
    out.push_str(emit.body);
    out.push_str("}}");
    Ok(out)
}

/// What a relay needs of a row's envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub route_key: String,
    pub definition_key: String,
    /// `destination.name`: the exchange.
    pub exchange: String,
    /// `destination.address`: the routing key.
    pub routing_key: String,
    pub aggregate_id: Uuid,
    pub tenant: String,
    /// The ce-id, `fetcher.job.<status>.<jobId>`.
    pub event_id: String,
    pub event_type: String,
    pub source: String,
    /// The job id.
    pub subject: String,
    pub timestamp: String,
    /// The AMQP body: the bytes embedded under `event.Payload`, as they are.
    pub body: String,
}

#[derive(Deserialize)]
struct WireEnvelope<'a> {
    version: i64,
    route_key: String,
    definition_key: String,
    target: String,
    transport: String,
    destination: WireDestination,
    aggregate_id: String,
    requirement: String,
    #[serde(borrow)]
    event: WireEvent<'a>,
}

#[derive(Deserialize)]
struct WireDestination {
    kind: String,
    name: String,
    address: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct WireEvent<'a> {
    #[serde(rename = "TenantID")]
    tenant_id: String,
    resource_type: String,
    event_type: String,
    #[serde(rename = "EventID")]
    event_id: String,
    source: String,
    subject: String,
    timestamp: String,
    #[serde(borrow)]
    payload: &'a RawValue,
}

impl Envelope {
    /// Reads a row's `payload` (§4.3), refusing what the relay's validation refuses.
    pub fn parse(row_id: &str, payload: &str) -> Result<Envelope> {
        let invalid = |reason: String| Error::InvalidEnvelope {
            id: row_id.to_owned(),
            reason,
        };
        let wire: WireEnvelope<'_> = serde_json::from_str(payload)
            .map_err(|e| invalid(format!("not a version-1 envelope: {e}")))?;
        if wire.version != 1 {
            return Err(invalid(format!("version {} is not 1", wire.version)));
        }
        if wire.route_key != format!("{}.rabbitmq", wire.definition_key) {
            return Err(invalid(
                "route_key is not <definition_key>.rabbitmq".to_owned(),
            ));
        }
        if wire.target != TARGET {
            return Err(invalid(format!(
                "target {:?} is not registered",
                wire.target
            )));
        }
        if wire.transport != "rabbitmq" || wire.destination.kind != "rabbitmq" {
            return Err(invalid(
                "transport and destination.kind are not rabbitmq".to_owned(),
            ));
        }
        if wire.requirement != "required" {
            return Err(invalid(format!("requirement {:?}", wire.requirement)));
        }
        let aggregate_id = Uuid::parse_str(&wire.aggregate_id)
            .ok()
            .filter(|id| !id.is_nil())
            .ok_or_else(|| invalid("aggregate_id is not a UUID".to_owned()))?;
        let event = wire.event;
        if event.resource_type.is_empty() || event.event_type.is_empty() || event.source.is_empty()
        {
            return Err(invalid(
                "ResourceType, EventType or Source is empty".to_owned(),
            ));
        }
        if event.payload.get().len() > MAX_PAYLOAD {
            return Err(invalid("the event payload is larger than 1 MiB".to_owned()));
        }
        Ok(Envelope {
            route_key: wire.route_key,
            definition_key: wire.definition_key,
            exchange: wire.destination.name,
            routing_key: wire.destination.address,
            aggregate_id,
            tenant: event.tenant_id,
            event_id: event.event_id,
            event_type: event.event_type,
            source: event.source,
            subject: event.subject,
            timestamp: event.timestamp,
            body: event.payload.get().to_owned(),
        })
    }
}

/// A JSON string as Go's `json.Marshal` writes it.
fn quote(text: &str) -> String {
    let bytes = contract::json::to_vec_compact(&serde_json::Value::String(text.to_owned()))
        .unwrap_or_default();
    String::from_utf8(bytes).unwrap_or_default()
}

/// True when Go's `compact` with HTML escaping would leave `json` as it is: no whitespace
/// outside strings, and no `<`, `>`, `&`, U+2028 or U+2029 unescaped inside them.
fn is_go_compact(json: &str) -> bool {
    let mut in_string = false;
    let mut escaped = false;
    for c in json.chars() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => return false,
                _ => {}
            }
        } else {
            match c {
                '"' => in_string = true,
                ' ' | '\t' | '\n' | '\r' => return false,
                _ => {}
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;
    use contract::event::TerminalStatus;

    use super::*;
    use crate::outbox::SINGLE_TENANT;

    fn emit(body: &str) -> Emit<'_> {
        Emit {
            tenant: SINGLE_TENANT,
            job_id: Uuid::parse_str("01890a5d-ac96-774b-bcce-b302099a8057").unwrap(),
            status: TerminalStatus::Completed,
            body,
            exchange: "fetcher.job.events",
            source: "//lerian/fetcher",
            at: DateTime::from_timestamp_millis(1_780_000_000_123).unwrap(),
        }
    }

    #[test]
    fn the_single_tenant_aggregate_id_is_upstreams() {
        assert_eq!(
            aggregate_id(SINGLE_TENANT).to_string(),
            "ad9466d1-c6f9-5be3-98e4-bfc3b1341269"
        );
    }

    #[test]
    fn the_envelope_has_gos_members_in_gos_order_and_the_body_verbatim() {
        let body = r#"{"jobId":"x","metadata":{"a":"\u003c"}}"#;
        let json = envelope(&emit(body)).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"version":1,"route_key":"job.completed.rabbitmq","definition_key":"job.completed","#,
                r#""target":"fetcher-job-events-rabbitmq","transport":"rabbitmq","#,
                r#""destination":{"kind":"rabbitmq","name":"fetcher.job.events","address":"job.completed"},"#,
                r#""aggregate_id":"ad9466d1-c6f9-5be3-98e4-bfc3b1341269","requirement":"required","#,
                r#""policy":{"enabled":true,"direct":"skip","outbox":"always","dlq":"on_routable_failure"},"#,
                r#""event":{"TenantID":"single-tenant","ResourceType":"job","EventType":"completed","#,
                r#""EventID":"fetcher.job.completed.01890a5d-ac96-774b-bcce-b302099a8057","#,
                r#""SchemaVersion":"1.0.0","Timestamp":"2026-05-28T20:26:40.123Z","#,
                r#""Source":"//lerian/fetcher","Subject":"01890a5d-ac96-774b-bcce-b302099a8057","#,
                r#""DataContentType":"application/json","DataSchema":"","SystemEvent":false,"#,
                r#""Payload":{"jobId":"x","metadata":{"a":"\u003c"}}}}"#,
            )
        );
        let parsed = Envelope::parse("row", &json).unwrap();
        assert_eq!(parsed.body, body);
        assert_eq!(parsed.routing_key, "job.completed");
    }

    #[test]
    fn a_body_go_would_rewrite_is_refused() {
        for body in [r#"{"a": 1}"#, r#"{"a":"<b>"}"#, "{", ""] {
            assert!(
                matches!(envelope(&emit(body)), Err(Error::InvalidWrite { .. })),
                "{body:?}"
            );
        }
    }

    #[test]
    fn a_tenant_lib_commons_refuses_is_refused() {
        let mut e = emit("{}");
        for tenant in ["", "-a", "a b", "a.b"] {
            e.tenant = tenant;
            assert!(envelope(&e).is_err(), "{tenant:?}");
        }
    }
}

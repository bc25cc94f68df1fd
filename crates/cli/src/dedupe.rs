//! The identity check that makes a job event's `ce-id` safe to deduplicate on (contract §8).
//!
//! The signature (contract §3) covers the routing key and the body, hence the body's `jobId`, but
//! not the CloudEvents headers. A captured event of job X, replayed with the `ce-id` of job Y,
//! still verifies; a consumer that deduplicates on `ce-id` would then drop Y's real event as a
//! duplicate. So the deduplication key is accepted only when it is the one the signed parts
//! imply: `fetcher.job.<status>.<jobId>`, `<status>` from the routing key `job.<status>` and
//! `<jobId>` from the body, with `ce-type`, and `ce-eventtype` and `ce-subject` when present,
//! agreeing. An execution's event (lifecycle §4), routed `job.execution.<op>`, is
//! `fetcher.job.execution.<op>.<jobId>.<datasource>`, the datasource from the body too.
//! Statuses are read from the routing key, so a new one needs no change here.

use std::fmt;

use contract::envelope::signed_job_id;

/// One CloudEvents header as received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attribute<'a> {
    Absent,
    Text(&'a str),
    /// Present, but neither a string nor a UTF-8 byte array.
    NotText,
}

/// The headers of an event that name what it is about.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    /// `ce-id`: required.
    pub id: Attribute<'a>,
    /// `ce-type`: required.
    pub kind: Attribute<'a>,
    /// `ce-eventtype`: checked when present.
    pub event_type: Attribute<'a>,
    /// `ce-subject`: checked when present.
    pub subject: Attribute<'a>,
}

/// Why an event's headers do not match its signed parts. Values taken from the event are
/// quoted with `{:?}`, so a hostile header cannot write control characters to a terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityError {
    /// The routing key is not `job.<status>`.
    RoutingKey(String),
    /// The body has no top-level string `jobId`, so no ce-id can be derived from it.
    NoJobId,
    /// An execution's body has no single top-level string `datasource`.
    NoDatasource,
    Missing(&'static str),
    NotText(&'static str),
    Mismatch {
        header: &'static str,
        found: String,
        expected: String,
    },
}

impl IdentityError {
    /// A stable identifier for `--json` output.
    pub fn code(&self) -> &'static str {
        match self {
            IdentityError::RoutingKey(_) => "event_routing_key",
            IdentityError::NoJobId => "event_job_id_missing",
            IdentityError::NoDatasource => "event_datasource_missing",
            IdentityError::Missing(_) => "event_attribute_missing",
            IdentityError::NotText(_) => "event_attribute_type",
            IdentityError::Mismatch { .. } => "event_attribute_mismatch",
        }
    }
}

impl fmt::Display for IdentityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdentityError::RoutingKey(key) => {
                write!(
                    f,
                    "routing key {key:?} is not job.<status> or job.execution.<status>"
                )
            }
            IdentityError::NoJobId => f.write_str("the signed body has no string jobId"),
            IdentityError::NoDatasource => {
                f.write_str("the signed execution body has no string datasource")
            }
            IdentityError::Missing(header) => write!(f, "{header} is missing"),
            IdentityError::NotText(header) => write!(f, "{header} is not text"),
            IdentityError::Mismatch {
                header,
                found,
                expected,
            } => write!(f, "{header} {found:?} is not the signed event's {expected}"),
        }
    }
}

/// The event's deduplication key (its `ce-id`), once it is shown to be the one its signed
/// routing key and body imply. Call it only on an event whose signature verified.
pub fn dedupe_key(
    routing_key: &str,
    body: &[u8],
    attributes: &Attributes<'_>,
) -> Result<String, IdentityError> {
    let (status, execution) = match routing_key.strip_prefix("job.execution.") {
        Some(status) => (Some(status), true),
        None => (routing_key.strip_prefix("job."), false),
    };
    let status = status
        .filter(|status| !status.is_empty() && !status.contains('.'))
        .ok_or_else(|| IdentityError::RoutingKey(routing_key.to_owned()))?;
    let job_id = signed_job_id(body);
    if job_id.is_empty() {
        return Err(IdentityError::NoJobId);
    }
    let (ce_id, kind) = if execution {
        let datasource = signed_datasource(body).ok_or(IdentityError::NoDatasource)?;
        (
            format!("fetcher.job.execution.{status}.{job_id}.{datasource}"),
            format!("studio.lerian.job.execution.{status}"),
        )
    } else {
        (
            format!("fetcher.job.{status}.{job_id}"),
            format!("studio.lerian.job.{status}"),
        )
    };
    expect("ce-id", attributes.id, &ce_id, true)?;
    expect("ce-type", attributes.kind, &kind, true)?;
    expect("ce-eventtype", attributes.event_type, status, false)?;
    expect("ce-subject", attributes.subject, &job_id, false)?;
    Ok(ce_id)
}

/// The body's top-level `datasource` string, when it has exactly one (a body naming two is
/// refused: which one a consumer reads is its decoder's choice).
fn signed_datasource(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Execution {
        datasource: String,
    }
    serde_json::from_slice::<Execution>(body)
        .ok()
        .map(|e| e.datasource)
        .filter(|name| !name.is_empty())
}

/// `attribute` must be exactly `expected`; an absent one passes unless `required`.
fn expect(
    header: &'static str,
    attribute: Attribute<'_>,
    expected: &str,
    required: bool,
) -> Result<(), IdentityError> {
    match attribute {
        Attribute::Text(found) if found == expected => Ok(()),
        Attribute::Text(found) => Err(IdentityError::Mismatch {
            header,
            found: found.to_owned(),
            expected: expected.to_owned(),
        }),
        Attribute::Absent if required => Err(IdentityError::Missing(header)),
        Attribute::Absent => Ok(()),
        Attribute::NotText => Err(IdentityError::NotText(header)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const X: &str = "6a5b0f8c-2f1e-4a41-9f0e-3d2c1b0a9e88";
    const Y: &str = "8f2c1a9e-4b30-4c02-9a1b-2d5e6f7a1c33";

    fn body(job_id: &str) -> Vec<u8> {
        format!(r#"{{"jobId":"{job_id}","metadata":{{}},"status":"completed"}}"#).into_bytes()
    }

    /// The headers the Worker sends for `job_id`'s `status` event.
    fn headers(status: &'static str, job_id: &'static str) -> (String, String) {
        (
            format!("fetcher.job.{status}.{job_id}"),
            format!("studio.lerian.job.{status}"),
        )
    }

    fn attributes<'a>(id: &'a str, kind: &'a str) -> Attributes<'a> {
        Attributes {
            id: Attribute::Text(id),
            kind: Attribute::Text(kind),
            event_type: Attribute::Absent,
            subject: Attribute::Absent,
        }
    }

    #[test]
    fn the_workers_own_events_pass_with_their_ce_id_as_the_key() {
        for status in ["completed", "failed", "canceled", "deleted"] {
            let (id, kind) = headers(status, X);
            let mut given = attributes(&id, &kind);
            given.event_type = Attribute::Text(status);
            given.subject = Attribute::Text(X);
            let key = dedupe_key(&format!("job.{status}"), &body(X), &given);
            assert_eq!(key, Ok(id.clone()), "{status}");
        }
    }

    #[test]
    fn an_execution_event_is_keyed_by_its_job_and_datasource() {
        let signed = format!(r#"{{"jobId":"{X}","datasource":"ledger","status":"SUCCEEDED"}}"#);
        let id = format!("fetcher.job.execution.succeeded.{X}.ledger");
        let kind = "studio.lerian.job.execution.succeeded";
        let key = dedupe_key(
            "job.execution.succeeded",
            signed.as_bytes(),
            &attributes(&id, kind),
        );
        assert_eq!(key, Ok(id.clone()));
        // Another datasource's ce-id, a job-level ce-id, or no datasource: refused.
        let other = format!("fetcher.job.execution.succeeded.{X}.crm");
        assert!(matches!(
            dedupe_key(
                "job.execution.succeeded",
                signed.as_bytes(),
                &attributes(&other, kind)
            ),
            Err(IdentityError::Mismatch {
                header: "ce-id",
                ..
            })
        ));
        let job_level = format!("fetcher.job.succeeded.{X}");
        assert!(dedupe_key(
            "job.execution.succeeded",
            signed.as_bytes(),
            &attributes(&job_level, kind)
        )
        .is_err());
        let twice = format!(r#"{{"jobId":"{X}","datasource":"a","datasource":"b"}}"#);
        assert_eq!(
            dedupe_key(
                "job.execution.succeeded",
                twice.as_bytes(),
                &attributes(&id, kind)
            ),
            Err(IdentityError::NoDatasource)
        );
        assert_eq!(
            dedupe_key(
                "job.execution.succeeded",
                body(X).as_slice(),
                &attributes(&id, kind)
            ),
            Err(IdentityError::NoDatasource)
        );
    }

    #[test]
    fn another_jobs_ce_id_is_refused() {
        let (id, kind) = headers("completed", Y);
        let error =
            dedupe_key("job.completed", &body(X), &attributes(&id, &kind)).expect_err("replayed");
        assert_eq!(error.code(), "event_attribute_mismatch");
        assert_eq!(
            error.to_string(),
            format!("ce-id \"{id}\" is not the signed event's fetcher.job.completed.{X}")
        );
    }

    #[test]
    fn a_ce_id_of_another_status_than_the_routing_key_is_refused() {
        let (id, _) = headers("failed", X);
        let (_, kind) = headers("completed", X);
        let error =
            dedupe_key("job.completed", &body(X), &attributes(&id, &kind)).expect_err("status");
        assert!(matches!(
            error,
            IdentityError::Mismatch {
                header: "ce-id",
                ..
            }
        ));
    }

    #[test]
    fn a_ce_type_that_disagrees_with_the_routing_key_is_refused() {
        let (id, _) = headers("completed", X);
        let (_, kind) = headers("failed", X);
        let error =
            dedupe_key("job.completed", &body(X), &attributes(&id, &kind)).expect_err("type");
        assert!(matches!(
            error,
            IdentityError::Mismatch {
                header: "ce-type",
                ..
            }
        ));
    }

    #[test]
    fn eventtype_and_subject_are_checked_when_present() {
        let (id, kind) = headers("completed", X);
        let mut given = attributes(&id, &kind);
        given.event_type = Attribute::Text("failed");
        let error = dedupe_key("job.completed", &body(X), &given).expect_err("eventtype");
        assert!(matches!(
            error,
            IdentityError::Mismatch {
                header: "ce-eventtype",
                ..
            }
        ));

        let mut given = attributes(&id, &kind);
        given.subject = Attribute::Text(Y);
        let error = dedupe_key("job.completed", &body(X), &given).expect_err("subject");
        assert!(matches!(
            error,
            IdentityError::Mismatch {
                header: "ce-subject",
                ..
            }
        ));

        let mut given = attributes(&id, &kind);
        given.subject = Attribute::NotText;
        let error = dedupe_key("job.completed", &body(X), &given).expect_err("type");
        assert_eq!(error, IdentityError::NotText("ce-subject"));
    }

    #[test]
    fn ce_id_and_ce_type_are_required() {
        let (id, kind) = headers("completed", X);
        let mut given = attributes(&id, &kind);
        given.id = Attribute::Absent;
        let error = dedupe_key("job.completed", &body(X), &given).expect_err("no ce-id");
        assert_eq!(error, IdentityError::Missing("ce-id"));

        let mut given = attributes(&id, &kind);
        given.kind = Attribute::Absent;
        let error = dedupe_key("job.completed", &body(X), &given).expect_err("no ce-type");
        assert_eq!(error, IdentityError::Missing("ce-type"));
    }

    #[test]
    fn routing_keys_that_are_not_job_status_are_refused() {
        let (id, kind) = headers("completed", X);
        for key in ["completed", "job.", "job.completed.x", "jobs.completed", ""] {
            let error = dedupe_key(key, &body(X), &attributes(&id, &kind)).expect_err(key);
            assert_eq!(error.code(), "event_routing_key", "{key}");
        }
    }

    #[test]
    fn a_body_without_a_string_job_id_has_no_key() {
        let (id, kind) = headers("completed", X);
        for body in [&b"{}"[..], b"[1]", b"not json", br#"{"jobId":1}"#] {
            let error =
                dedupe_key("job.completed", body, &attributes(&id, &kind)).expect_err("no job id");
            assert_eq!(error, IdentityError::NoJobId);
        }
    }

    #[test]
    fn hostile_values_are_quoted() {
        let (_, kind) = headers("completed", X);
        let error = dedupe_key("job.completed", &body(X), &attributes("\x1b[2Jx", &kind))
            .expect_err("hostile");
        let text = error.to_string();
        assert!(!text.contains('\x1b'), "{text}");
        assert!(text.contains("\\u{1b}"), "{text}");
    }
}

//! One delivery, from its headers to its disposition (contract §4's table of outcomes), in the
//! order its steps run: admit it (size, signature, body, limits: `authenticate.rs`,
//! `rejects.rs`), claim and run it (`claim.rs`, `run.rs`, `produce.rs`), end it (`finish.rs`,
//! `cancel.rs`), then what follows the commit (`after_commit.rs`).

use contract::envelope::{self, Route};
use contract::message::check_header;
use contract::{JobMessage, Redacted};
use serde_json::Map;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::core::{Disposition, JobCore};
use super::inbound::Inbound;
use super::{authenticate, claim, rejects};
use crate::metrics;

impl JobCore {
    /// Handles one job message. Never panics on input; every branch logs why it ended as it did.
    ///
    /// Nothing costly happens before the signature holds: the size is checked first, the signed
    /// job id is found by a shallow scan, the signature is computed over the body in place, and
    /// only then is the body parsed.
    ///
    /// Every log line of the delivery carries its `X-Request-Id` (and its job id, once known)
    /// from the `job` span.
    pub async fn handle(&self, message: &Inbound<'_>, stop: &CancellationToken) -> Disposition {
        let headers = message.headers;
        let span = tracing::info_span!(
            "job",
            request_id = headers.request_id.unwrap_or(""),
            tenant = headers.tenant.unwrap_or(""),
            job_id = tracing::field::Empty,
        );
        if let Some(header) = headers.traceparent.filter(|_| !span.is_disabled()) {
            match crate::traces::parse_traceparent(header, headers.tracestate) {
                Some(parent) => crate::traces::continue_trace(&span, parent),
                None => malformed_traceparent(),
            }
        }
        self.handle_delivery(message, stop).instrument(span).await
    }

    async fn handle_delivery(
        &self,
        message: &Inbound<'_>,
        stop: &CancellationToken,
    ) -> Disposition {
        let headers = &message.headers;
        let route = Route {
            tenant: headers.signed_tenant(),
            exchange: message.exchange,
            routing_key: message.routing_key,
        };
        let body = message.body;
        let signed_job_id = envelope::scan_job_id(body);
        if body.len() > self.settings.limits.max_message_bytes {
            return rejects::too_large(self, headers, &route, body, &signed_job_id).await;
        }
        let mut digest = None;
        if let Err(disposition) =
            authenticate::authenticate(self, headers, &route, body, &signed_job_id, &mut digest)
                .await
        {
            return disposition;
        }

        let job = match JobMessage::parse(body) {
            Ok(job) => job,
            Err(error) => return rejects::unusable(self, headers, body, &error).await,
        };
        tracing::Span::current().record("job_id", tracing::field::display(job.job_id));
        if let Err(mismatch) = check_header(headers.job_id, job.job_id) {
            return rejects::job_id_header(mismatch);
        }
        if let Err(error) = job.check_metadata_size(self.settings.limits.max_metadata_bytes) {
            metrics::rejected(error.code());
            tracing::warn!(job_id = %job.job_id, reason = error.code(), %error, "Job failed: its metadata is too large for its events.");
            let message = Redacted::new(&format!("invalid job message: {error}"));
            return rejects::fail_unrun(self, job.job_id, headers, &Map::new(), message).await;
        }
        // A job over the limits fails before anything is stored or claimed for it.
        if let Err(error) = self.ports.extractor.check_limits(&job.mapped_fields) {
            metrics::rejected("limit_exceeded");
            tracing::warn!(job_id = %job.job_id, %error, "Job failed: it exceeds the engine's limits.");
            let message = Redacted::new(&error.to_string());
            return rejects::fail_unrun(self, job.job_id, headers, &job.metadata, message).await;
        }
        let digest = digest.unwrap_or_else(|| authenticate::message_digest(body));
        claim::claim_and_run(self, &job, headers, &digest, stop).await
    }
}

/// A `Traceparent` that is not W3C's: the job runs in a trace of its own. Said once, at DEBUG
/// (anyone who can publish chooses the header; it never fails a job).
fn malformed_traceparent() {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::debug!("A job message's Traceparent is not a W3C traceparent; its job starts a trace of its own (said once).");
    }
}

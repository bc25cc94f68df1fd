//! The Worker's stamp on a dead letter it places: what it covers, signing and verification.
//!
//! The `x-fetcher-*` headers of [`crate::wire`] say why and whence the Worker refused a
//! message, and `fetcherctl dlq requeue` publishes the letter to the route they name. Anyone
//! who may publish to the work queue could set them too (on a message the Worker cannot copy,
//! which RabbitMQ dead-letters with its headers as they came, or straight into the dead-letter
//! queue), so the Worker signs them: `x-fetcher-stamp` is the lowercase hex HMAC-SHA256, under
//! the internal key, of
//!
//! ```text
//! fetcher-dead-letter-stamp-v1\n<reason>\n<queue>\n<exchange>\n<routing key>\n<refused at>\n<body sha256>\n
//! ```
//!
//! each field but the first written as `<byte length>:<bytes>` so that no field can run into
//! the next, the time as decimal Unix seconds and the body's digest as lowercase hex. The text
//! opens with [`STAMP_DOMAIN`], a letter where every job or control signature (contract §3)
//! opens with the digits of its `t`: no stamp is ever a job signature, nor the reverse, though
//! the key is the same.
//!
//! As in [`crate::envelope`], the MAC is the caller's function: this crate holds no key.

/// The first line of every stamped text: the purpose and its version.
pub const STAMP_DOMAIN: &str = "fetcher-dead-letter-stamp-v1";

/// What the Worker stamps on a dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp<'a> {
    /// `x-fetcher-reason`.
    pub reason: &'a str,
    /// `x-fetcher-queue`.
    pub queue: &'a str,
    /// `x-fetcher-exchange`.
    pub exchange: &'a str,
    /// `x-fetcher-routing-key`.
    pub routing_key: &'a str,
    /// `x-fetcher-refused-at`, Unix seconds.
    pub refused_at: u64,
    /// The lowercase hex SHA-256 of the letter's body.
    pub body_sha256: &'a str,
}

impl Stamp<'_> {
    /// The bytes the stamp's HMAC covers.
    pub fn text(&self) -> Vec<u8> {
        let refused_at = self.refused_at.to_string();
        let fields = [
            self.reason,
            self.queue,
            self.exchange,
            self.routing_key,
            &refused_at,
            self.body_sha256,
        ];
        let mut text = Vec::with_capacity(
            STAMP_DOMAIN.len() + 1 + fields.iter().map(|f| f.len() + 8).sum::<usize>(),
        );
        text.extend_from_slice(STAMP_DOMAIN.as_bytes());
        text.push(b'\n');
        for field in fields {
            text.extend_from_slice(field.len().to_string().as_bytes());
            text.push(b':');
            text.extend_from_slice(field.as_bytes());
            text.push(b'\n');
        }
        text
    }

    /// The value of `x-fetcher-stamp`; `mac` returns the lowercase hex HMAC-SHA256 of its
    /// argument under the internal key.
    pub fn sign(&self, mac: impl FnOnce(&[u8]) -> String) -> String {
        mac(&self.text())
    }

    /// Whether `stamp` is this stamp's HMAC; `mac_matches(text, stamp)` compares in constant
    /// time under the internal key.
    pub fn verify(&self, stamp: &str, mac_matches: impl FnOnce(&[u8], &str) -> bool) -> bool {
        mac_matches(&self.text(), stamp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{signing_payload, Route};

    fn keys() -> crypto::KeySet {
        crypto::KeySet::from_base64("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=").expect("key")
    }

    const DIGEST: &str = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";

    fn stamp() -> Stamp<'static> {
        Stamp {
            reason: "signature_mismatch",
            queue: "fetcher.extract-external-data.queue",
            exchange: "",
            routing_key: "fetcher.extract-external-data.queue",
            refused_at: 1_700_000_000,
            body_sha256: DIGEST,
        }
    }

    fn signed(stamp: &Stamp<'_>) -> String {
        stamp.sign(|text| keys().internal_hmac().sign_hex(text))
    }

    fn verifies(stamp: &Stamp<'_>, value: &str) -> bool {
        stamp.verify(value, |text, value| {
            keys().internal_hmac().verify_hex(text, value)
        })
    }

    #[test]
    fn the_text_is_the_domain_then_each_field_with_its_length() {
        assert_eq!(
            String::from_utf8(stamp().text()).expect("text"),
            format!(
                "fetcher-dead-letter-stamp-v1\n18:signature_mismatch\n35:fetcher.extract-external-data.queue\n\
                 0:\n35:fetcher.extract-external-data.queue\n10:1700000000\n64:{DIGEST}\n"
            )
        );
    }

    #[test]
    fn a_stamp_verifies_only_as_it_was_signed() {
        let value = signed(&stamp());
        assert!(verifies(&stamp(), &value));
        let changed = [
            Stamp {
                reason: "tenant_mismatch",
                ..stamp()
            },
            Stamp {
                queue: "other.queue",
                ..stamp()
            },
            Stamp {
                exchange: "attacker",
                ..stamp()
            },
            Stamp {
                routing_key: "attacker.key",
                ..stamp()
            },
            Stamp {
                refused_at: 1_700_000_001,
                ..stamp()
            },
            Stamp {
                body_sha256: "0000000000000000000000000000000000000000000000000000000000000000",
                ..stamp()
            },
        ];
        for stamp in changed {
            assert!(!verifies(&stamp, &value), "{stamp:?} verified");
        }
        assert!(!verifies(&stamp(), &value.to_uppercase()));
        assert!(!verifies(&stamp(), ""));
        let other = crypto::KeySet::from_base64("ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=")
            .expect("key");
        assert!(!verifies(
            &stamp(),
            &stamp().sign(|t| other.internal_hmac().sign_hex(t))
        ));
    }

    #[test]
    fn fields_cannot_run_into_each_other() {
        let moved = Stamp {
            reason: "signature_mismatch\n35:fetcher.extract-external-data.queue",
            queue: "",
            ..stamp()
        };
        assert_ne!(moved.text(), stamp().text());
        let shifted = Stamp {
            exchange: "fetcher.extract-external-data.queue",
            routing_key: "",
            ..stamp()
        };
        assert_ne!(shifted.text(), stamp().text());
    }

    #[test]
    fn no_job_signature_text_is_a_stamp_text() {
        // A job's (and a control request's) signed text opens with the digits of its `t`.
        let route = Route {
            tenant: "",
            exchange: "",
            routing_key: "fetcher.extract-external-data.queue",
        };
        let job = signing_payload("1700000000", &route, br#"{"jobId":"x"}"#);
        assert!(job[0].is_ascii_digit());
        assert!(!stamp().text()[0].is_ascii_digit());
        assert!(!job.starts_with(STAMP_DOMAIN.as_bytes()));
    }
}

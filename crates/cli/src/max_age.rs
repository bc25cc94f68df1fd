//! `watch --max-age`: how old an event's signature may be. A private queue only holds events
//! published while watching, so the contract's 5 minutes apply; a durable queue's backlog may
//! hold events of any age, so by default no age is refused there. Either way every signature is
//! verified, and one more than 30 s in the future is refused (contract §3).

use contract::envelope::VerifyPolicy;

/// The contract's freshness window, the default on a private queue.
pub const PRIVATE_QUEUE_SECS: u64 = 300;

/// The oldest signature accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxAge {
    Secs(u64),
    Unlimited,
}

impl MaxAge {
    /// `--max-age` when given, else the default for the kind of queue.
    pub fn or_default(given: Option<MaxAge>, durable_queue: bool) -> MaxAge {
        match (given, durable_queue) {
            (Some(given), _) => given,
            (None, true) => MaxAge::Unlimited,
            (None, false) => MaxAge::Secs(PRIVATE_QUEUE_SECS),
        }
    }

    /// The verification policy: the contract's, with this age limit.
    pub fn policy(self) -> VerifyPolicy {
        let max_age_secs = match self {
            MaxAge::Secs(secs) => i64::try_from(secs).unwrap_or(i64::MAX),
            MaxAge::Unlimited => i64::MAX,
        };
        VerifyPolicy {
            max_age_secs,
            ..VerifyPolicy::default()
        }
    }

    /// For the line that says what is watched.
    pub fn describe(self) -> String {
        match self {
            MaxAge::Secs(secs) => format!("signatures older than {secs} s are rejected"),
            MaxAge::Unlimited => "signatures of any age are accepted".to_owned(),
        }
    }
}

/// Parses `none`, or a whole number with an optional unit: `s` (the default), `m`, `h`, `d`.
pub fn parse(text: &str) -> Result<MaxAge, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("none") {
        return Ok(MaxAge::Unlimited);
    }
    let invalid =
        || format!("{text:?} is not an age: give seconds, or a number with s, m, h or d, or none");
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let multiplier: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(invalid()),
    };
    let number: u64 = number.parse().map_err(|_| invalid())?;
    number
        .checked_mul(multiplier)
        .filter(|secs| i64::try_from(*secs).is_ok())
        .map(MaxAge::Secs)
        .ok_or_else(|| format!("{text:?} is too long an age: use none for no limit"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_with_and_without_units() {
        assert_eq!(parse("300"), Ok(MaxAge::Secs(300)));
        assert_eq!(parse("0"), Ok(MaxAge::Secs(0)));
        assert_eq!(parse("45s"), Ok(MaxAge::Secs(45)));
        assert_eq!(parse("5m"), Ok(MaxAge::Secs(300)));
        assert_eq!(parse("2h"), Ok(MaxAge::Secs(7_200)));
        assert_eq!(parse(" 7d "), Ok(MaxAge::Secs(604_800)));
        assert_eq!(parse("None"), Ok(MaxAge::Unlimited));
    }

    #[test]
    fn bad_ages_are_refused() {
        for text in ["", "m", "-5", "5 m", "5w", "1.5h", "5mm", "none5"] {
            assert!(parse(text).is_err(), "{text:?}");
        }
        let error = parse("99999999999999999d").expect_err("overflow");
        assert!(error.contains("too long"), "{error}");
        assert!(parse("18446744073709551615").is_err(), "past i64");
    }

    #[test]
    fn defaults_depend_on_the_queue() {
        assert_eq!(MaxAge::or_default(None, false), MaxAge::Secs(300));
        assert_eq!(MaxAge::or_default(None, true), MaxAge::Unlimited);
        let given = Some(MaxAge::Secs(60));
        assert_eq!(MaxAge::or_default(given, true), MaxAge::Secs(60));
    }

    #[test]
    fn the_policy_keeps_the_future_limit() {
        let policy = MaxAge::Unlimited.policy();
        assert_eq!(policy.max_age_secs, i64::MAX);
        assert_eq!(
            policy.max_future_secs,
            VerifyPolicy::default().max_future_secs
        );
        assert!(!policy.allow_legacy_body_signature);
        assert_eq!(MaxAge::Secs(300).policy().max_age_secs, 300);
    }
}

//! Reading RabbitMQ's refusal of a declaration that differs from what it has.

/// RabbitMQ's `PRECONDITION_FAILED - inequivalent arg '<argument>' for <object>: received
/// <value> but current is <value>`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Inequivalent {
    pub(super) argument: String,
    /// What the Worker declared.
    pub(super) received: String,
    /// What the broker has.
    pub(super) current: String,
}

impl Inequivalent {
    pub(super) fn parse(text: &str) -> Option<Inequivalent> {
        let rest = &text[text.find("inequivalent arg '")? + "inequivalent arg '".len()..];
        let (argument, rest) = rest.split_once('\'')?;
        let rest = &rest[rest.find(": received ")? + ": received ".len()..];
        let (received, current) = rest.split_once(" but current is ")?;
        Some(Inequivalent {
            argument: argument.to_owned(),
            received: value(received),
            current: value(current.trim_end_matches(['"', ')', ' '])),
        })
    }

    pub(super) fn refusal(&self, what: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "{what} could not be declared: it exists with {} = {} on the broker, and the Worker \
             declares {} = {}; delete it or align it with deploy/rabbitmq/definitions.json",
            self.argument,
            self.current,
            self.argument,
            self.received
        )
    }
}

/// Turns a refused declaration into the startup error: the broker's own words (which name the
/// argument and both values) in ours.
pub(super) fn refusal(what: String) -> impl FnOnce(lapin::Error) -> anyhow::Error {
    move |error: lapin::Error| match Inequivalent::parse(&error.to_string()) {
        Some(differs) => differs.refusal(&what),
        None => anyhow::anyhow!(
            "{what} could not be declared ({error}); if it exists with other settings, delete \
             it or align it with deploy/rabbitmq/definitions.json"
        ),
    }
}

/// `none`, `'x'`, or `the value 'x' of type 'longstr'` → `none` or `x`.
fn value(text: &str) -> String {
    let text = text.trim();
    let text = text.strip_prefix("the value ").unwrap_or(text);
    let text = match text.rfind(" of type '") {
        Some(at) => &text[..at],
        None => text,
    };
    text.trim_matches('\'').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_brokers_refusal_is_read_into_argument_and_both_values() {
        let text = "protocol error: AMQP soft error: PRECONDITION-FAILED: PRECONDITION_FAILED - \
                    inequivalent arg 'x-dead-letter-exchange' for queue 'q' in vhost '/': \
                    received the value 'fetcher.dlx' of type 'longstr' but current is none";
        assert_eq!(
            Inequivalent::parse(text),
            Some(Inequivalent {
                argument: "x-dead-letter-exchange".into(),
                received: "fetcher.dlx".into(),
                current: "none".into(),
            })
        );
        let text = "inequivalent arg 'x-message-ttl' for queue 'fetcher.dlq' in vhost 'v': \
                    received '604800000' but current is '1000'";
        let differs = Inequivalent::parse(text).expect("parsed");
        assert_eq!(
            (differs.received.as_str(), differs.current.as_str()),
            ("604800000", "1000")
        );
        let message = differs
            .refusal("the dead-letter queue \"fetcher.dlq\"")
            .to_string();
        assert!(
            message.contains("x-message-ttl = 1000 on the broker")
                && message.contains("declares x-message-ttl = 604800000"),
            "{message}"
        );
        assert_eq!(Inequivalent::parse("NOT_FOUND - no queue 'q'"), None);
    }
}

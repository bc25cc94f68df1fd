//! Where an outbox row goes: the AMQP events exchange, or the MQTT mirror (lifecycle §5).

use std::fmt;

/// An outbox row's sink. Each sink's rows are leased, published, backed off and repaired on their
/// own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sink {
    /// The events exchange (contract §8): every event has this row.
    Amqp,
    /// The IoT-Jobs-shaped mirror: a row per event when the mirror is on.
    Mqtt,
}

impl Sink {
    /// The `sink` column's value and the metrics' `sink` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Sink::Amqp => "amqp",
            Sink::Mqtt => "mqtt",
        }
    }

    /// The sink of a `sink` column's value.
    pub fn parse(value: &str) -> Option<Sink> {
        match value {
            "amqp" => Some(Sink::Amqp),
            "mqtt" => Some(Sink::Mqtt),
            _ => None,
        }
    }
}

impl fmt::Display for Sink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sink_reads_back_as_itself() {
        for sink in [Sink::Amqp, Sink::Mqtt] {
            assert_eq!(Sink::parse(sink.as_str()), Some(sink));
        }
        assert_eq!(Sink::parse("AMQP"), None);
    }
}

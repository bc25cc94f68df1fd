//! AMQP header values as the signature rules see them (feature `amqp`): shared by the Worker,
//! which verifies job messages, and `fetcherctl`, which verifies events.

use amq_protocol_types::AMQPValue;

use super::HeaderValue;

/// A header as the signature rules see it (contract §3): AMQP strings are text, integers (a `t`
/// sent as a number) are integers, anything else (byte arrays included) is named for the error.
pub fn header_value(value: &AMQPValue) -> HeaderValue<'_> {
    match value {
        AMQPValue::LongString(s) => HeaderValue::Text(s.as_bytes()),
        AMQPValue::ShortString(s) => HeaderValue::Text(s.as_str().as_bytes()),
        AMQPValue::ShortShortInt(i) => HeaderValue::Integer(i64::from(*i)),
        AMQPValue::ShortShortUInt(i) => HeaderValue::Integer(i64::from(*i)),
        AMQPValue::ShortInt(i) => HeaderValue::Integer(i64::from(*i)),
        AMQPValue::ShortUInt(i) => HeaderValue::Integer(i64::from(*i)),
        AMQPValue::LongInt(i) => HeaderValue::Integer(i64::from(*i)),
        AMQPValue::LongUInt(i) => HeaderValue::Integer(i64::from(*i)),
        AMQPValue::LongLongInt(i) => HeaderValue::Integer(*i),
        AMQPValue::Timestamp(t) => {
            i64::try_from(*t).map_or(HeaderValue::Other("timestamp"), HeaderValue::Integer)
        }
        AMQPValue::ByteArray(_) => HeaderValue::Other("byte array"),
        AMQPValue::Boolean(_) => HeaderValue::Other("boolean"),
        AMQPValue::FieldTable(_) => HeaderValue::Other("table"),
        AMQPValue::FieldArray(_) => HeaderValue::Other("array"),
        _ => HeaderValue::Other("non-string value"),
    }
}

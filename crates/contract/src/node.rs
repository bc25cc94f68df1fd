//! A JSON tree that keeps members in document order, so Go's decoding rules can be replayed.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// One JSON value. Objects keep every member, duplicates included, in the order they appear,
/// because Go's decoder assigns members one after another (the last match wins) and matches
/// struct fields case-insensitively: `{"jobId":"a","JOBID":"b"}` means `b`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

impl Node {
    /// The JSON type name used in error messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "boolean",
            Node::Number(_) => "number",
            Node::String(_) => "string",
            Node::Array(_) => "array",
            Node::Object(_) => "object",
        }
    }

    /// Whether any string or member name in the tree holds a NUL character.
    pub(crate) fn has_nul(&self) -> bool {
        match self {
            Node::String(s) => s.contains('\0'),
            Node::Array(items) => items.iter().any(Node::has_nul),
            Node::Object(members) => members
                .iter()
                .any(|(name, value)| name.contains('\0') || value.has_nul()),
            Node::Null | Node::Bool(_) | Node::Number(_) => false,
        }
    }

    /// Converts into a `serde_json::Value` the way Go fills a `map[string]any`: for a repeated
    /// member the last one wins.
    pub(crate) fn into_value(self) -> Value {
        match self {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(b),
            Node::Number(n) => Value::Number(n),
            Node::String(s) => Value::String(s),
            Node::Array(items) => Value::Array(items.into_iter().map(Node::into_value).collect()),
            Node::Object(members) => Value::Object(into_map(members)),
        }
    }
}

/// Collects object members into a map; a repeated key keeps its last value.
pub(crate) fn into_map(members: Vec<(String, Node)>) -> Map<String, Value> {
    let mut map = Map::new();
    for (key, node) in members {
        map.insert(key, node.into_value());
    }
    map
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Number::from_f64(v)
            .map(Node::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Node, E> {
        Ok(Node::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Node, E> {
        Ok(Node::String(v))
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(0).min(1024));
        while let Some((key, value)) = map.next_entry::<String, Node>()? {
            members.push((key, value));
        }
        Ok(Node::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Node {
        serde_json::from_str(text).expect("valid JSON")
    }

    #[test]
    fn object_members_keep_document_order_and_duplicates() {
        let node = parse(r#"{"b":1,"a":2,"b":3}"#);
        let Node::Object(members) = node else {
            panic!("expected an object")
        };
        let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["b", "a", "b"]);
    }

    #[test]
    fn conversion_to_value_keeps_the_last_duplicate() {
        let value = parse(r#"{"k":1,"k":{"x":[true,null,"s",1.5]}}"#).into_value();
        assert_eq!(
            value,
            serde_json::json!({"k": {"x": [true, null, "s", 1.5]}})
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let text = "[".repeat(100_000);
        assert!(serde_json::from_str::<Node>(&text).is_err());
    }
}

//! Filter conditions of a job message: operators and their bound values.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};
use serde_json::Number;

use super::error::MessageError;
use super::fold;
use crate::node::Node;

/// A filter operator (contract §4). Each takes a JSON array of scalar values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    /// One value: `=`; more: `IN (...)`.
    Eq,
    /// `<>`; several values: the AND of every `<>`.
    Ne,
    /// `>` the first value.
    Gt,
    /// `>=` the first value.
    Gte,
    /// `<` the first value.
    Lt,
    /// `<=` the first value.
    Lte,
    /// Exactly two values: `>= a AND <= b`.
    Between,
    /// `IN (...)`.
    In,
    /// `NOT IN (...)`.
    Nin,
    /// `LIKE` the first value, which must be a string.
    Like,
}

impl Operator {
    /// Every operator, in the order they are applied.
    pub const ALL: [Operator; 10] = [
        Operator::Eq,
        Operator::Ne,
        Operator::Gt,
        Operator::Gte,
        Operator::Lt,
        Operator::Lte,
        Operator::Between,
        Operator::In,
        Operator::Nin,
        Operator::Like,
    ];

    /// The member name of the operator in a job message.
    pub fn name(self) -> &'static str {
        match self {
            Operator::Eq => "eq",
            Operator::Ne => "ne",
            Operator::Gt => "gt",
            Operator::Gte => "gte",
            Operator::Lt => "lt",
            Operator::Lte => "lte",
            Operator::Between => "between",
            Operator::In => "in",
            Operator::Nin => "nin",
            Operator::Like => "like",
        }
    }

    fn from_member(member: &str) -> Option<Operator> {
        Operator::ALL
            .into_iter()
            .find(|op| fold::matches(member, op.name()))
    }
}

/// One value to compare with. Always sent to the database as a bound parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum FilterValue {
    Bool(bool),
    Number(Number),
    String(String),
}

/// A value serializes as the JSON scalar it was sent as.
impl Serialize for FilterValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            FilterValue::Bool(b) => serializer.serialize_bool(*b),
            FilterValue::Number(n) => n.serialize(serializer),
            FilterValue::String(s) => serializer.serialize_str(s),
        }
    }
}

/// The operators applied to one field; all of them must hold (AND). Serializes as the message
/// form `{"<operator>": [values]}`, operators by their contract names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FilterCondition {
    clauses: BTreeMap<Operator, Vec<FilterValue>>,
}

impl Serialize for FilterCondition {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.clauses().map(|(op, values)| (op.name(), values)))
    }
}

impl FilterCondition {
    /// The operators with their values, in [`Operator::ALL`] order.
    pub fn clauses(&self) -> impl Iterator<Item = (Operator, &[FilterValue])> {
        self.clauses
            .iter()
            .map(|(op, values)| (*op, values.as_slice()))
    }

    /// Whether no operator is set (such a condition filters nothing).
    pub fn is_empty(&self) -> bool {
        self.clauses.is_empty()
    }

    /// Builds a condition from `(operator, values)` pairs, validating each as a message would be.
    pub fn from_clauses(
        clauses: impl IntoIterator<Item = (Operator, Vec<FilterValue>)>,
    ) -> Result<Self, MessageError> {
        let mut condition = FilterCondition::default();
        for (op, values) in clauses {
            check_arity(op, &values, "filter")?;
            condition.clauses.insert(op, values);
        }
        Ok(condition)
    }

    /// Decodes the condition object at `path`. An operator Go would silently ignore (an unknown
    /// member) is an error here: ignoring it would widen the query to rows the caller excluded.
    pub(crate) fn from_node(node: Node, path: &str) -> Result<Self, MessageError> {
        let members = match node {
            Node::Object(members) => members,
            Node::Null => return Ok(FilterCondition::default()),
            other => return Err(wrong_type(path, "an object of operators", &other)),
        };
        let mut condition = FilterCondition::default();
        for (member, value) in members {
            let op_path = format!("{path}.{member}");
            let Some(op) = Operator::from_member(&member) else {
                return Err(MessageError::UnknownOperator {
                    path: path.to_owned(),
                    operator: member,
                });
            };
            match value {
                // Go leaves a nil slice: the operator is not set.
                Node::Null => {
                    condition.clauses.remove(&op);
                }
                Node::Array(items) => {
                    let values = items
                        .into_iter()
                        .map(|item| scalar(item, &op_path))
                        .collect::<Result<Vec<_>, _>>()?;
                    check_arity(op, &values, &op_path)?;
                    condition.clauses.insert(op, values);
                }
                other => return Err(wrong_type(&op_path, "an array of values", &other)),
            }
        }
        Ok(condition)
    }
}

fn scalar(node: Node, path: &str) -> Result<FilterValue, MessageError> {
    match node {
        Node::Bool(b) => Ok(FilterValue::Bool(b)),
        Node::Number(n) => Ok(FilterValue::Number(n)),
        Node::String(s) => Ok(FilterValue::String(s)),
        Node::Null => Err(MessageError::InvalidFilter {
            path: path.to_owned(),
            reason: "null is not a comparable value",
        }),
        other => Err(wrong_type(path, "a string, number or boolean", &other)),
    }
}

fn check_arity(op: Operator, values: &[FilterValue], path: &str) -> Result<(), MessageError> {
    let invalid = |reason| {
        Err(MessageError::InvalidFilter {
            path: path.to_owned(),
            reason,
        })
    };
    match op {
        Operator::Between if values.len() != 2 => invalid("between takes exactly 2 values"),
        Operator::Like if !matches!(values.first(), Some(FilterValue::String(_))) => {
            invalid("like takes a string pattern as its first value")
        }
        _ if values.is_empty() => invalid("an operator needs at least one value"),
        _ => Ok(()),
    }
}

pub(crate) fn wrong_type(path: &str, expected: &'static str, found: &Node) -> MessageError {
    MessageError::WrongType {
        path: path.to_owned(),
        expected,
        found: found.kind(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(text: &str) -> Result<FilterCondition, MessageError> {
        FilterCondition::from_node(serde_json::from_str(text).expect("JSON"), "f")
    }

    #[test]
    fn operators_match_case_insensitively() {
        let c = condition(r#"{"EQ":[1],"Between":["a","b"]}"#).expect("valid");
        let ops: Vec<Operator> = c.clauses().map(|(op, _)| op).collect();
        assert_eq!(ops, [Operator::Eq, Operator::Between]);
    }

    #[test]
    fn serializes_as_the_message_form_with_contract_names() {
        let c = condition(r#"{"Between":["2024-01-01","2024-01-31"],"IN":[1,2.5,true]}"#)
            .expect("valid");
        assert_eq!(
            serde_json::to_value(&c).expect("serialize"),
            serde_json::json!({"in": [1, 2.5, true], "between": ["2024-01-01", "2024-01-31"]})
        );
        let back = condition(&serde_json::to_string(&c).expect("serialize")).expect("reparse");
        assert_eq!(back, c);
    }

    #[test]
    fn unknown_operator_is_rejected_with_its_name() {
        let e = condition(r#"{"equals":[1]}"#).unwrap_err();
        assert_eq!(e.code(), "unknown_filter_operator");
        assert!(e.to_string().contains("\"equals\""));
    }

    #[test]
    fn between_needs_exactly_two_values() {
        assert!(condition(r#"{"between":[1]}"#).is_err());
        assert!(condition(r#"{"between":[1,2,3]}"#).is_err());
        assert!(condition(r#"{"between":[1,2]}"#).is_ok());
    }

    #[test]
    fn like_needs_a_string_first() {
        assert!(condition(r#"{"like":[1]}"#).is_err());
        assert!(condition(r#"{"like":["a%"]}"#).is_ok());
    }

    #[test]
    fn empty_value_lists_nulls_and_nested_values_are_rejected() {
        for text in [
            r#"{"eq":[]}"#,
            r#"{"in":[null]}"#,
            r#"{"eq":[[1]]}"#,
            r#"{"eq":[{"a":1}]}"#,
            r#"{"eq":1}"#,
        ] {
            assert!(condition(text).is_err(), "{text} should be rejected");
        }
    }

    #[test]
    fn null_operator_unsets_it_like_go() {
        let c = condition(r#"{"eq":[1],"EQ":null}"#).expect("valid");
        assert!(c.is_empty());
    }
}

//! Upstream's `plugin_crm` path (`docs/UPSTREAM-MONGO-MSSQL.md` §3): a datasource named
//! exactly `plugin_crm` on a MongoDB connection is the CRM, whose sensitive fields are stored
//! encrypted and, for searching, as HMACs under `search.*`.
//!
//! This module holds the path's pure rules: which datasource it is, how a filter on a sensitive
//! field is rewritten to its `search.*` field with hashed values, and which requested fields
//! call for decryption. The MongoDB reads that use them are the datasource's.

use std::collections::BTreeMap;

use contract::message::{FilterCondition, FilterValue, Operator};
use crypto::CrmHashKey;

use crate::connection::DatasourceKind;

/// The datasource name of the CRM path, matched exactly (case and all), as upstream does.
pub const NAME: &str = "plugin_crm";

/// Whether the datasource `name` on a connection of `kind` takes the CRM path.
pub fn is_plugin_crm(name: &str, kind: DatasourceKind) -> bool {
    name == NAME && kind == DatasourceKind::MongoDb
}

/// The sensitive fields a filter may name, and the `search.*` field holding their HMACs.
const SEARCH_FIELDS: [(&str, &str); 8] = [
    ("document", "search.document"),
    ("name", "search.name"),
    ("banking_details.account", "search.banking_details_account"),
    ("banking_details.iban", "search.banking_details_iban"),
    ("contact.primary_email", "search.contact_primary_email"),
    ("contact.secondary_email", "search.contact_secondary_email"),
    ("contact.mobile_phone", "search.contact_mobile_phone"),
    ("contact.other_phone", "search.contact_other_phone"),
];

/// The `search.*` field of a sensitive `field`, if it is one.
pub fn search_field(field: &str) -> Option<&'static str> {
    SEARCH_FIELDS
        .iter()
        .find(|(plain, _)| *plain == field)
        .map(|(_, search)| *search)
}

/// Why a CRM collection's filters cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrmFilterError {
    /// Filters are given and the hash key is not configured.
    #[error(transparent)]
    Key(#[from] crypto::CrmKeyError),
    /// `ne` or `like` on a field only its HMAC can be searched by: an HMAC says nothing of order
    /// or patterns. Upstream drops such a clause and returns rows it would have excluded; here
    /// the job fails instead.
    #[error(
        "filter {op} on {field} cannot apply: {field} is searched by its HMAC, which supports \
         only eq, gt, gte, lt, lte, between, in and nin"
    )]
    NotSearchable { field: String, op: &'static str },
}

/// Rewrites one CRM collection's filters as upstream does: a filter on a sensitive field moves
/// to its `search.*` field with every non-empty string value replaced by its HMAC (other values
/// are kept as they are); every other field is kept as it is. Upstream requires the hash key as
/// soon as a collection has filters, sensitive or not, and so does this; `hash_key` is the
/// configured `CRYPTO_HASH_SECRET_KEY_PLUGIN_CRM` (possibly empty).
pub fn rewrite_filters(
    filters: &BTreeMap<String, FilterCondition>,
    hash_key: &str,
) -> Result<BTreeMap<String, FilterCondition>, CrmFilterError> {
    if filters.is_empty() {
        return Ok(BTreeMap::new());
    }
    let key = CrmHashKey::new(hash_key)?;
    let mut rewritten = BTreeMap::new();
    for (field, condition) in filters {
        let Some(search) = search_field(field) else {
            rewritten.insert(field.clone(), condition.clone());
            continue;
        };
        let mut clauses = Vec::new();
        for (op, values) in condition.clauses() {
            if matches!(op, Operator::Ne | Operator::Like) {
                return Err(CrmFilterError::NotSearchable {
                    field: field.clone(),
                    op: op.name(),
                });
            }
            clauses.push((op, values.iter().map(|v| hashed(&key, v)).collect()));
        }
        // The clauses come from a valid condition; only their values changed, not their arity.
        let condition = FilterCondition::from_clauses(clauses)
            .expect("a valid condition stays valid with hashed values");
        rewritten.insert(search.to_owned(), condition);
    }
    Ok(rewritten)
}

fn hashed(key: &CrmHashKey, value: &FilterValue) -> FilterValue {
    match value {
        FilterValue::String(s) if !s.is_empty() => FilterValue::String(key.hash(s)),
        other => other.clone(),
    }
}

/// Whether rows read for `fields` are decrypted: upstream decrypts when a requested field is
/// `document` or `name`, or a dotted path.
pub fn decrypts(fields: &[String]) -> bool {
    fields
        .iter()
        .any(|f| f == "document" || f == "name" || f.contains('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "test-secret-key-for-hashing";

    fn condition(clauses: Vec<(Operator, Vec<FilterValue>)>) -> FilterCondition {
        FilterCondition::from_clauses(clauses).expect("valid")
    }

    fn s(v: &str) -> FilterValue {
        FilterValue::String(v.into())
    }

    #[test]
    fn only_an_exact_plugin_crm_on_mongodb_is_the_crm() {
        assert!(is_plugin_crm("plugin_crm", DatasourceKind::MongoDb));
        assert!(!is_plugin_crm("Plugin_CRM", DatasourceKind::MongoDb));
        assert!(!is_plugin_crm("plugin_crm", DatasourceKind::Postgres));
        assert!(!is_plugin_crm("plugin_crm_2", DatasourceKind::MongoDb));
    }

    #[test]
    fn sensitive_fields_move_to_search_with_hashed_strings_and_others_stay() {
        let filters = BTreeMap::from([
            (
                "document".to_owned(),
                condition(vec![(Operator::Eq, vec![s("12345678900"), s("")])]),
            ),
            (
                "contact.primary_email".to_owned(),
                condition(vec![(Operator::In, vec![s("john@example.com")])]),
            ),
            (
                "status".to_owned(),
                condition(vec![(Operator::Ne, vec![s("inactive")])]),
            ),
            (
                "legal_person.representative.document".to_owned(),
                condition(vec![(Operator::Eq, vec![s("kept")])]),
            ),
        ]);
        let rewritten = rewrite_filters(&filters, KEY).expect("rewritten");
        let keys: Vec<&str> = rewritten.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "legal_person.representative.document",
                "search.contact_primary_email",
                "search.document",
                "status"
            ]
        );
        let values = |field: &str, op: Operator| -> Vec<FilterValue> {
            rewritten[field]
                .clauses()
                .find(|(o, _)| *o == op)
                .map(|(_, v)| v.to_vec())
                .expect("clause")
        };
        // Known answers of crypto::crm; the empty string is kept as it is, as upstream does.
        assert_eq!(
            values("search.document", Operator::Eq),
            [
                s("5630239c165c901b5358b2d67abd470cc03b7c9b679589a7daaed252f368b9a9"),
                s("")
            ]
        );
        assert_eq!(
            values("search.contact_primary_email", Operator::In),
            [s(
                "387dc0bf563e209411b82b00e82749d3ff01fc40d11062fd04367913d9f2a108"
            )]
        );
        assert_eq!(values("status", Operator::Ne), [s("inactive")]);
        assert_eq!(
            values("legal_person.representative.document", Operator::Eq),
            [s("kept")]
        );
    }

    #[test]
    fn numbers_and_booleans_are_not_hashed_and_every_searchable_operator_is() {
        let n = FilterValue::Number(7.into());
        let filters = BTreeMap::from([(
            "name".to_owned(),
            condition(vec![
                (Operator::Between, vec![s("a"), s("b")]),
                (Operator::Gte, vec![n.clone()]),
                (Operator::Nin, vec![FilterValue::Bool(true), s("c")]),
            ]),
        )]);
        let rewritten = rewrite_filters(&filters, KEY).expect("rewritten");
        let key = CrmHashKey::new(KEY).expect("key");
        let clauses: Vec<(Operator, Vec<FilterValue>)> = rewritten["search.name"]
            .clauses()
            .map(|(op, v)| (op, v.to_vec()))
            .collect();
        assert_eq!(
            clauses,
            [
                (Operator::Gte, vec![n]),
                (
                    Operator::Between,
                    vec![s(&key.hash("a")), s(&key.hash("b"))]
                ),
                (
                    Operator::Nin,
                    vec![FilterValue::Bool(true), s(&key.hash("c"))]
                ),
            ]
        );
    }

    #[test]
    fn ne_and_like_on_a_hashed_field_fail_instead_of_widening_the_query() {
        for op in [Operator::Ne, Operator::Like] {
            let filters = BTreeMap::from([(
                "contact.mobile_phone".to_owned(),
                condition(vec![(op, vec![s("+55%")])]),
            )]);
            let error = rewrite_filters(&filters, KEY).unwrap_err();
            assert_eq!(
                error,
                CrmFilterError::NotSearchable {
                    field: "contact.mobile_phone".into(),
                    op: op.name()
                }
            );
            assert!(!error.to_string().contains("+55"), "{error}");
        }
    }

    #[test]
    fn any_filter_needs_the_hash_key_and_none_does_not() {
        let filters = BTreeMap::from([(
            "status".to_owned(),
            condition(vec![(Operator::Eq, vec![s("active")])]),
        )]);
        assert_eq!(
            rewrite_filters(&filters, "").unwrap_err(),
            CrmFilterError::Key(crypto::CrmKeyError::HashKeyMissing)
        );
        assert!(rewrite_filters(&BTreeMap::new(), "")
            .expect("no filters")
            .is_empty());
    }

    #[test]
    fn decryption_is_for_document_name_or_a_dotted_field() {
        let fields = |f: &[&str]| f.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(decrypts(&fields(&["status", "document"])));
        assert!(decrypts(&fields(&["name"])));
        assert!(decrypts(&fields(&["contact.primary_email"])));
        assert!(!decrypts(&fields(&["contact", "natural_person", "status"])));
        assert!(!decrypts(&[]));
    }
}

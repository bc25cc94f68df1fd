use contract::message::{FilterValue, Operator};
use mongodb::bson::{doc, Bson};

use super::*;
use crate::catalog::{Column, TableName, ValueKind};
use crate::plan::{Predicate, TablePlan};

fn path(name: &str) -> Column {
    Column {
        name: name.to_owned(),
        db_type: "document path".to_owned(),
        kind: ValueKind::Bson,
    }
}

fn plan(fields: &[&str], predicates: Vec<Predicate>) -> TablePlan {
    TablePlan {
        key: "orders".to_owned(),
        name: TableName {
            schema: None,
            table: "orders".to_owned(),
        },
        schema: "shop".to_owned(),
        columns: fields.iter().map(|f| path(f)).collect(),
        predicates,
    }
}

fn predicate(field: &str, op: Operator, values: Vec<FilterValue>) -> Predicate {
    Predicate {
        column: path(field),
        op,
        values,
    }
}

fn s(text: &str) -> FilterValue {
    FilterValue::String(text.to_owned())
}

fn n(value: serde_json::Value) -> FilterValue {
    match value {
        serde_json::Value::Number(n) => FilterValue::Number(n),
        _ => unreachable!(),
    }
}

#[test]
fn the_projection_holds_the_mapped_paths_and_id_only_when_asked() {
    let p = plan(&["amount", "customer.name"], vec![]);
    assert_eq!(
        projection(&p).unwrap(),
        Some(doc! { "amount": 1, "customer.name": 1, "_id": 0 })
    );
    let p = plan(&["_id", "amount"], vec![]);
    assert_eq!(
        projection(&p).unwrap(),
        Some(doc! { "_id": 1, "amount": 1 })
    );
    assert_eq!(projection(&plan(&[], vec![])).unwrap(), None);
}

#[test]
fn overlapping_paths_are_refused_and_siblings_are_not() {
    let error = projection(&plan(&["contact", "contact.email"], vec![])).unwrap_err();
    assert!(
        matches!(error, QueryError::Path(ref t) if t.contains("overlap")),
        "{error:?}"
    );
    assert!(projection(&plan(&["contact", "contacts.email"], vec![])).is_ok());
}

#[test]
fn every_operator_maps_to_its_query_operator_with_typed_values() {
    let cases = [
        (Operator::Eq, vec![s("a")], doc! { "f": { "$eq": "a" } }),
        (
            Operator::Eq,
            vec![s("a"), s("b")],
            doc! { "f": { "$in": ["a", "b"] } },
        ),
        (
            Operator::In,
            vec![n(1.into())],
            doc! { "f": { "$in": [1_i64] } },
        ),
        (Operator::Nin, vec![s("a")], doc! { "f": { "$nin": ["a"] } }),
        (
            Operator::Ne,
            vec![s("a"), s("b")],
            doc! { "f": { "$nin": ["a", "b"] } },
        ),
        (
            Operator::Gt,
            vec![n(1.5.into())],
            doc! { "f": { "$gt": 1.5 } },
        ),
        (
            Operator::Gte,
            vec![n(2.into())],
            doc! { "f": { "$gte": 2_i64 } },
        ),
        (
            Operator::Lt,
            vec![FilterValue::Bool(true)],
            doc! { "f": { "$lt": true } },
        ),
        (Operator::Lte, vec![s("z")], doc! { "f": { "$lte": "z" } }),
        (
            Operator::Between,
            vec![n(1.into()), n(9.into())],
            doc! { "f": { "$gte": 1_i64, "$lte": 9_i64 } },
        ),
        (
            Operator::Like,
            vec![s("a.b%")],
            doc! { "f": { "$regex": "^a\\.b.*(?!.)", "$options": "s" } },
        ),
    ];
    for (op, values, expected) in cases {
        let f = filter(&plan(&["f"], vec![predicate("f", op, values)])).unwrap();
        assert_eq!(f, doc! { "$and": [expected] }, "{op:?}");
    }
    assert_eq!(filter(&plan(&["f"], vec![])).unwrap(), doc! {});
}

#[test]
fn values_that_look_like_operators_stay_values() {
    let hostile = [
        s("$where"),
        s("{\"$gt\": \"\"}"),
        s("function() { return true; }"),
    ];
    let f = filter(&plan(
        &["f"],
        vec![predicate("f", Operator::In, hostile.to_vec())],
    ))
    .unwrap();
    let Some(Bson::Array(all)) = f.get("$and") else {
        panic!("{f}")
    };
    let Bson::Document(only) = &all[0] else {
        panic!()
    };
    let in_values = only.get_document("f").unwrap().get_array("$in").unwrap();
    assert!(in_values.iter().all(|v| matches!(v, Bson::String(_))));
}

#[test]
fn fields_naming_operators_or_bad_paths_are_refused() {
    for field in [
        "$where",
        "a.$function",
        "a..b",
        "",
        ".a",
        "a.",
        "a\0b",
        "$expr",
    ] {
        let error = filter(&plan(
            &["f"],
            vec![predicate(field, Operator::Eq, vec![s("x")])],
        ))
        .unwrap_err();
        assert!(matches!(error, QueryError::Path(_)), "{field:?}: {error:?}");
        assert!(projection(&plan(&[field], vec![])).is_err(), "{field:?}");
    }
    assert!(check_path(&"a".repeat(MAX_PATH_BYTES + 1)).is_err());
    assert!(
        check_path("a.b_c.d$").is_ok(),
        "a $ inside a segment is a name"
    );
}

#[test]
fn like_patterns_are_bounded_in_length_and_wildcards() {
    let like = |pattern: String| {
        filter(&plan(
            &["f"],
            vec![predicate("f", Operator::Like, vec![s(&pattern)])],
        ))
    };
    assert!(like("%a%b%c%d%e%f%g%".to_owned()).is_ok(), "eight runs");
    let error = like("%a%b%c%d%e%f%g%h%".to_owned()).unwrap_err();
    assert!(
        matches!(error, QueryError::Filter(ref t) if t.contains("runs of %")),
        "{error:?}"
    );
    assert!(like("a%%%%%%%%%%%%%%%%%%b".to_owned()).is_ok(), "one run");
    assert!(like("\\%".repeat(20)).is_ok(), "escaped % are literals");
    assert!(like("x".repeat(MAX_LIKE_CHARS)).is_ok());
    assert!(like("x".repeat(MAX_LIKE_CHARS + 1)).is_err());
}

#[test]
fn huge_value_lists_are_refused_before_any_query() {
    let values = vec![n(1.into()); MAX_VALUES + 1];
    let error = filter(&plan(&["f"], vec![predicate("f", Operator::In, values)])).unwrap_err();
    assert!(
        matches!(error, QueryError::Filter(ref t) if t.contains("at most")),
        "{error:?}"
    );
}

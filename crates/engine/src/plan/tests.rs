//! Plan validation against a given catalog.

use super::*;
use crate::catalog::{Table, ValueKind};

fn naming() -> Naming {
    Naming {
        default_schema: "public".into(),
        catalog: Some("shop".into()),
        keys: Keys::DefaultSchemaStripped,
    }
}

fn column(name: &str) -> Column {
    Column {
        name: name.into(),
        db_type: "integer".into(),
        kind: ValueKind::Int,
    }
}

fn catalog() -> Catalog {
    let mut catalog = Catalog::default();
    let users = TableName {
        schema: None,
        table: "users".into(),
    };
    let orders = TableName {
        schema: Some("sales".into()),
        table: "orders".into(),
    };
    let table = |schema: &str, columns| Table {
        schema: schema.into(),
        columns,
        document_paths: false,
    };
    catalog.tables.insert(
        users,
        table("public", vec![column("id"), column("name"), column("age")]),
    );
    catalog
        .tables
        .insert(orders, table("sales", vec![column("id"), column("total")]));
    catalog
}

fn tables(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
    pairs
        .iter()
        .map(|(t, fields)| {
            (
                t.to_string(),
                fields.iter().map(|f| f.to_string()).collect(),
            )
        })
        .collect()
}

fn plan(pairs: &[(&str, &[&str])]) -> Result<Vec<TablePlan>> {
    plan_datasource(
        "pg",
        &tables(pairs),
        None,
        &catalog(),
        &naming(),
        &Limits::default(),
    )
}

#[test]
fn table_keys_are_normalized_and_sorted() {
    let plans = plan(&[
        ("shop.sales.orders", &["total"]),
        ("public.users", &["name", "id", "name"]),
    ])
    .expect("valid");
    let keys: Vec<&str> = plans.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, ["sales.orders", "users"]);
    let fields: Vec<&str> = plans[1].columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(fields, ["id", "name"], "sorted, without duplicates");
}

#[test]
fn unknown_tables_and_fields_fail_schema_validation() {
    let e = plan(&[("nope", &["id"])]).unwrap_err().to_string();
    assert_eq!(
        e,
        "datasource pg failed schema validation: table \"nope\" does not exist"
    );
    let e = plan(&[("users", &["id", "secret"])])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("field \"secret\" does not exist in table \"users\""),
        "{e}"
    );
    let e = plan(&[("other.shop.users", &["id"])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("names another database"), "{e}");
    let e = plan(&[("a.b.c.d", &["id"])]).unwrap_err().to_string();
    assert!(e.contains("too many name parts"), "{e}");
}

#[test]
fn keys_naming_the_same_table_are_merged_fields_united() {
    let plans = plan(&[
        ("users", &["name", "id"]),
        ("public.users", &["age", "name"]),
        ("PUBLIC.users", &["id"]),
        ("shop.public.users", &["name"]),
    ])
    .expect("one table, asked for four ways");
    assert_eq!(plans.len(), 1, "{plans:?}");
    assert_eq!(plans[0].key, "users");
    let fields: Vec<&str> = plans[0].columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(fields, ["age", "id", "name"], "each field once, sorted");
}

#[test]
fn a_merged_table_is_checked_field_by_field() {
    let e = plan(&[("users", &["id"]), ("PUBLIC.users", &["secret"])]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "datasource pg failed schema validation: field \"secret\" does not exist in table \"PUBLIC.users\""
    );
    let limits = Limits {
        max_fields_per_table: 2,
        ..Limits::default()
    };
    let merged = tables(&[("users", &["id", "name"]), ("public.users", &["age"])]);
    let e = plan_datasource("pg", &merged, None, &catalog(), &naming(), &limits).unwrap_err();
    assert_eq!(
        e.to_string(),
        "job exceeds the limit of 2 fields per table",
        "the union counts"
    );
}

#[test]
fn filters_of_merged_keys_all_apply() {
    let condition = |op, n: &str| {
        FilterCondition::from_clauses([(op, vec![FilterValue::String(n.into())])]).expect("valid")
    };
    let filters: BTreeMap<String, BTreeMap<String, FilterCondition>> = [
        (
            "public.users".to_string(),
            [("age".to_string(), condition(Operator::Gte, "18"))].into(),
        ),
        (
            "users".to_string(),
            [("age".to_string(), condition(Operator::Lt, "65"))].into(),
        ),
    ]
    .into();
    let plans = plan_datasource(
        "pg",
        &tables(&[("users", &["id"]), ("Public.users", &["name"])]),
        Some(&filters),
        &catalog(),
        &naming(),
        &Limits::default(),
    )
    .expect("valid");
    assert_eq!(plans.len(), 1);
    let ops: Vec<Operator> = plans[0].predicates.iter().map(|p| p.op).collect();
    assert_eq!(ops, [Operator::Gte, Operator::Lt]);
}

#[test]
fn mysql_keys_stay_as_written_each_its_own_table() {
    let naming = Naming {
        default_schema: "shop".into(),
        catalog: None,
        keys: Keys::AsWritten,
    };
    let mut catalog = catalog();
    let users = catalog
        .tables
        .remove(&TableName {
            schema: None,
            table: "users".into(),
        })
        .expect("users");
    catalog.tables.insert(
        TableName {
            schema: None,
            table: "users".into(),
        },
        Table {
            schema: "shop".into(),
            ..users
        },
    );
    let plans = plan_datasource(
        "my",
        &tables(&[("shop.users", &["id"]), ("users", &["name"])]),
        None,
        &catalog,
        &naming,
        &Limits::default(),
    )
    .expect("valid");
    let keys: Vec<(&str, &str)> = plans
        .iter()
        .map(|p| (p.key.as_str(), p.columns[0].name.as_str()))
        .collect();
    assert_eq!(keys, [("shop.users", "id"), ("users", "name")]);
    assert!(plans
        .iter()
        .all(|p| p.schema == "shop" && p.name.schema.is_none()));
}

#[test]
fn hostile_identifiers_are_just_unknown_names() {
    for table in ["users; DROP TABLE users", "users\"--", "users`", "users/*"] {
        let e = plan(&[(table, &["id"])]).unwrap_err();
        assert!(matches!(e, EngineError::Schema { .. }), "{table}: {e}");
    }
    let e = plan(&[("users", &["id\" FROM users; --"])]).unwrap_err();
    assert!(matches!(e, EngineError::Schema { .. }));
}

#[test]
fn limits_are_enforced_not_clamped() {
    let limits = Limits {
        max_datasources: 10,
        max_tables_per_datasource: 1,
        max_fields_per_table: 2,
    };
    let two_tables = tables(&[("users", &["id"]), ("sales.orders", &["id"])]);
    let e = plan_datasource("pg", &two_tables, None, &catalog(), &naming(), &limits).unwrap_err();
    assert_eq!(
        e.to_string(),
        "job exceeds the limit of 1 tables per datasource"
    );
    let three_fields = tables(&[("users", &["id", "name", "age"])]);
    let e = plan_datasource("pg", &three_fields, None, &catalog(), &naming(), &limits).unwrap_err();
    assert_eq!(e.to_string(), "job exceeds the limit of 2 fields per table");
}

#[test]
fn filters_attach_to_their_table_and_may_use_unselected_fields() {
    let condition = FilterCondition::from_clauses([
        (Operator::Gte, vec![FilterValue::String("18".into())]),
        (Operator::Lt, vec![FilterValue::String("65".into())]),
    ])
    .expect("valid");
    let filters: BTreeMap<String, BTreeMap<String, FilterCondition>> = [(
        "public.users".to_string(),
        [("age".to_string(), condition)].into(),
    )]
    .into();
    let plans = plan_datasource(
        "pg",
        &tables(&[("users", &["id"])]),
        Some(&filters),
        &catalog(),
        &naming(),
        &Limits::default(),
    )
    .expect("valid");
    let ops: Vec<Operator> = plans[0].predicates.iter().map(|p| p.op).collect();
    assert_eq!(ops, [Operator::Gte, Operator::Lt]);
    assert_eq!(plans[0].predicates[0].column.name, "age");
}

#[test]
fn filters_on_unmapped_tables_or_unknown_fields_fail() {
    let condition =
        FilterCondition::from_clauses([(Operator::Eq, vec![FilterValue::Bool(true)])]).expect("ok");
    let on = |table: &str, field: &str| {
        let filters: BTreeMap<String, BTreeMap<String, FilterCondition>> = [(
            table.to_string(),
            [(field.to_string(), condition.clone())].into(),
        )]
        .into();
        plan_datasource(
            "pg",
            &tables(&[("users", &["id"])]),
            Some(&filters),
            &catalog(),
            &naming(),
            &Limits::default(),
        )
    };
    assert!(matches!(
        on("sales.orders", "id"),
        Err(EngineError::Filter { .. })
    ));
    assert!(matches!(
        on("users", "nope"),
        Err(EngineError::Schema { .. })
    ));
}

#[test]
fn limits_are_checked_on_the_job_shape_alone() {
    use contract::message::MappedFields;
    let limits = Limits::default();
    let shape = |datasources: usize, tables: usize, fields: &[&str]| -> MappedFields {
        (0..datasources)
            .map(|d| {
                let tables = (0..tables)
                    .map(|t| {
                        (
                            format!("t{t}"),
                            fields.iter().map(|f| f.to_string()).collect(),
                        )
                    })
                    .collect();
                (format!("ds{d}"), tables)
            })
            .collect()
    };
    assert!(limits.check(&shape(10, 20, &["a"])).is_ok());
    let over = |mapped| match limits.check(&mapped) {
        Err(EngineError::LimitExceeded { what, .. }) => what,
        other => panic!("{other:?}"),
    };
    assert_eq!(over(shape(11, 1, &["a"])), "datasources");
    assert_eq!(over(shape(1, 21, &["a"])), "tables per datasource");
    let many: Vec<String> = (0..51).map(|i| format!("f{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert_eq!(over(shape(1, 1, &many)), "fields per table");
    // A field named twice is one field, as the plan counts it.
    assert!(limits.check(&shape(1, 1, &["a"; 60])).is_ok());
}

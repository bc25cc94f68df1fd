//! SQL text and parameters for every operator, in every dialect.

use super::*;
use crate::catalog::TableName;

fn column(name: &str, kind: ValueKind, db_type: &str) -> Column {
    Column {
        name: name.into(),
        db_type: db_type.into(),
        kind,
    }
}

fn plan(predicates: Vec<Predicate>) -> TablePlan {
    TablePlan {
        key: "users".into(),
        name: TableName {
            schema: None,
            table: "users".into(),
        },
        schema: "public".into(),
        columns: vec![column("id", ValueKind::Int, "integer")],
        predicates,
    }
}

fn predicate(column: Column, op: Operator, values: Vec<FilterValue>) -> Predicate {
    Predicate { column, op, values }
}

fn n(i: i64) -> FilterValue {
    FilterValue::Number(i.into())
}

fn s(text: &str) -> FilterValue {
    FilterValue::String(text.into())
}

fn plain(_: &Column, quoted: &str) -> String {
    quoted.to_owned()
}

#[test]
fn identifiers_are_quoted_with_doubled_quotes() {
    assert_eq!(Dialect::Postgres.quote(r#"a"b"#), r#""a""b""#);
    assert_eq!(Dialect::MySql.quote("a`b"), "`a``b`");
    assert_eq!(Dialect::SqlServer.quote("a]b[c"), "[a]]b[c]");
    assert_eq!(
        Dialect::SqlServer.quote("x]; DROP TABLE y --"),
        "[x]]; DROP TABLE y --]"
    );
    assert_eq!(
        Dialect::Postgres.quote("x; DROP TABLE y --"),
        r#""x; DROP TABLE y --""#
    );
}

#[test]
fn every_operator_becomes_bound_parameters_in_postgres() {
    let id = column("id", ValueKind::Int, "integer");
    let name = column("name", ValueKind::Text, "text");
    let q = Dialect::Postgres.select(
        &plan(vec![
            predicate(id.clone(), Operator::Eq, vec![n(1)]),
            predicate(id.clone(), Operator::Eq, vec![n(1), n(2)]),
            predicate(id.clone(), Operator::Ne, vec![n(3), n(4)]),
            predicate(id.clone(), Operator::Gt, vec![n(5), n(99)]),
            predicate(id.clone(), Operator::Gte, vec![n(6)]),
            predicate(id.clone(), Operator::Lt, vec![n(7)]),
            predicate(id.clone(), Operator::Lte, vec![n(8)]),
            predicate(id.clone(), Operator::Between, vec![n(9), n(10)]),
            predicate(id.clone(), Operator::In, vec![n(11)]),
            predicate(id, Operator::Nin, vec![n(12), n(13)]),
            predicate(name, Operator::Like, vec![s("a%'; --")]),
        ]),
        plain,
    );
    let expected = concat!(
        r#"SELECT "id" FROM "public"."users" WHERE "id" = CAST($1 AS integer)"#,
        r#" AND "id" IN (CAST($2 AS integer), CAST($3 AS integer))"#,
        r#" AND ("id" <> CAST($4 AS integer) AND "id" <> CAST($5 AS integer))"#,
        r#" AND "id" > CAST($6 AS integer) AND "id" >= CAST($7 AS integer)"#,
        r#" AND "id" < CAST($8 AS integer) AND "id" <= CAST($9 AS integer)"#,
        r#" AND ("id" >= CAST($10 AS integer) AND "id" <= CAST($11 AS integer))"#,
        r#" AND "id" IN (CAST($12 AS integer))"#,
        r#" AND "id" NOT IN (CAST($13 AS integer), CAST($14 AS integer))"#,
        r#" AND CAST("name" AS text) LIKE $15"#,
    );
    assert_eq!(q.sql, expected);
    assert_eq!(q.params.len(), 15);
    assert_eq!(q.params[14], Param::Text("a%'; --".into()));
    assert_eq!(
        q.params[5],
        Param::Text("5".into()),
        "gt uses the first value only"
    );
}

#[test]
fn tables_are_always_qualified_with_the_catalogs_schema() {
    // A bare request (`name.schema` is `None`) still names the schema the catalog found.
    let mut p = plan(Vec::new());
    p.name.table = "pg_authid".into();
    assert_eq!(
        Dialect::Postgres.select(&p, plain).sql,
        r#"SELECT "id" FROM "public"."pg_authid""#
    );
    p.schema = "shop".into();
    p.name.table = "or`ders".into();
    assert_eq!(
        Dialect::MySql.select(&p, plain).sql,
        "SELECT `id` FROM `shop`.`or``ders`"
    );
    p.schema = r#"we"ird"#.into();
    assert_eq!(
        Dialect::Postgres.select(&p, plain).sql,
        r#"SELECT "id" FROM "we""ird"."or`ders""#
    );
}

#[test]
fn sqlserver_binds_native_values_as_numbered_at_parameters() {
    let id = column("id", ValueKind::Int, "int");
    let name = column("na]me", ValueKind::Text, "nvarchar");
    let mut p = plan(vec![
        predicate(id.clone(), Operator::Eq, vec![n(1)]),
        predicate(id.clone(), Operator::Ne, vec![n(2), n(3)]),
        predicate(id.clone(), Operator::Between, vec![n(4), n(5)]),
        predicate(id, Operator::Nin, vec![FilterValue::Bool(true)]),
        predicate(name, Operator::Like, vec![s("[a]%'--")]),
    ]);
    p.schema = "dbo".into();
    p.name.table = "us]ers".into();
    let q = Dialect::SqlServer.select(&p, plain);
    assert_eq!(
        q.sql,
        concat!(
            "SELECT [id] FROM [dbo].[us]]ers] WHERE [id] = @P1",
            " AND ([id] <> @P2 AND [id] <> @P3) AND ([id] >= @P4 AND [id] <= @P5)",
            r" AND [id] NOT IN (@P6) AND [na]]me] LIKE @P7 ESCAPE '\'"
        )
    );
    assert_eq!(
        q.params,
        [
            Param::Int(1),
            Param::Int(2),
            Param::Int(3),
            Param::Int(4),
            Param::Int(5),
            Param::Bool(true),
            Param::Text(r"\[a]%'--".into())
        ]
    );
}

#[test]
fn mysql_binds_native_values_with_question_marks() {
    let id = column("id", ValueKind::Int, "int");
    let mut p = plan(vec![
        predicate(
            id.clone(),
            Operator::In,
            vec![n(1), FilterValue::Bool(true)],
        ),
        predicate(id, Operator::Like, vec![s("x%")]),
    ]);
    p.name.schema = Some("other db".into());
    p.schema = "other db".into();
    let q = Dialect::MySql.select(&p, plain);
    assert_eq!(
        q.sql,
        "SELECT `id` FROM `other db`.`users` WHERE `id` IN (?, ?) AND `id` LIKE ?"
    );
    assert_eq!(
        q.params,
        [Param::Int(1), Param::Bool(true), Param::Text("x%".into())]
    );
}

#[test]
fn between_dates_on_a_timestamp_includes_the_whole_end_day() {
    let at = column(
        "created_at",
        ValueKind::TimestampTz,
        "timestamp with time zone",
    );
    let q = Dialect::Postgres.select(
        &plan(vec![predicate(
            at,
            Operator::Between,
            vec![s("2026-01-01"), s("2026-01-31")],
        )]),
        plain,
    );
    assert!(q.sql.ends_with(
        r#"("created_at" >= CAST($1 AS timestamp with time zone) AND "created_at" < CAST($2 AS timestamp with time zone))"#
    ), "{}", q.sql);
    assert_eq!(q.params[1], Param::Text("2026-02-01".into()));
}

#[test]
fn between_with_full_timestamps_keeps_the_bound_inclusive() {
    let at = column(
        "created_at",
        ValueKind::Timestamp,
        "timestamp without time zone",
    );
    let q = Dialect::Postgres.select(
        &plan(vec![predicate(
            at,
            Operator::Between,
            vec![s("2026-01-01"), s("2026-01-31T10:00:00")],
        )]),
        plain,
    );
    assert!(q.sql.contains(r#""created_at" <= CAST($2"#), "{}", q.sql);
    assert_eq!(q.params[1], Param::Text("2026-01-31T10:00:00".into()));
}

//! Table keys as a job writes them: which table a key names, and the key it gets in the result,
//! per kind of datasource, as the Go Worker writes them.
//!
//! A key is `table`, `schema.table` or `catalog.schema.table`. PostgreSQL (and SQL Server, with
//! `dbo`) keys are normalised: the default schema, compared case-insensitively, and the catalog
//! part are dropped, so `users`, `public.users`, `PUBLIC.users` and `<db>.public.users` are all
//! the key `users`. MySQL (and MongoDB) keys stay exactly as the job wrote them: `shop.orders`
//! is the result key `shop.orders` even on a connection to `shop`.

use crate::catalog::TableName;
use crate::error::{EngineError, Result};

/// How a datasource names tables: its default schema, the name a three-part
/// `catalog.schema.table` key must carry, and how its result keys are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Naming {
    /// A name without a schema lives here (PostgreSQL `public`, MySQL the connection database).
    pub default_schema: String,
    /// `None` when the datasource takes no catalog part (MySQL).
    pub catalog: Option<String>,
    pub keys: Keys,
}

/// How a datasource writes its result keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keys {
    /// Exactly as the job wrote them. The default schema is recognised only spelled exactly
    /// (MySQL database names are case-sensitive on Linux).
    AsWritten,
    /// `table`, or `schema.table` outside the default schema, which is recognised in any case.
    DefaultSchemaStripped,
}

impl Naming {
    fn is_default_schema(&self, schema: &str) -> bool {
        match self.keys {
            Keys::AsWritten => schema == self.default_schema,
            Keys::DefaultSchemaStripped => schema.eq_ignore_ascii_case(&self.default_schema),
        }
    }
}

/// The table a requested key names: its schema is `None` in the default schema, so keys that
/// spell one table differently name the same [`TableName`].
pub fn parse_table_key(key: &str, naming: &Naming) -> Result<TableName> {
    let parts: Vec<&str> = key.split('.').collect();
    let invalid = |why: &str| EngineError::Schema {
        connection: String::new(),
        detail: format!("table {key:?} {why}"),
    };
    if parts.iter().any(|p| p.is_empty()) {
        return Err(invalid("has an empty name part"));
    }
    let (schema, table) = match parts.as_slice() {
        [table] => (None, *table),
        [schema, table] => (Some(*schema), *table),
        [catalog, schema, table] => match &naming.catalog {
            Some(expected) if expected == catalog => (Some(*schema), *table),
            Some(_) => return Err(invalid("names another database")),
            None => return Err(invalid("has too many name parts")),
        },
        _ => return Err(invalid("has too many name parts")),
    };
    let schema = schema.filter(|s| !naming.is_default_schema(s));
    Ok(TableName {
        schema: schema.map(str::to_owned),
        table: table.to_owned(),
    })
}

/// The result key of the table `name` that the job asked for as `requested`.
pub fn result_key(requested: &str, name: &TableName, naming: &Naming) -> String {
    match naming.keys {
        Keys::AsWritten => requested.to_owned(),
        Keys::DefaultSchemaStripped => match &name.schema {
            Some(schema) => format!("{schema}.{}", name.table),
            None => name.table.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn postgres() -> Naming {
        Naming {
            default_schema: "public".into(),
            catalog: Some("shop".into()),
            keys: Keys::DefaultSchemaStripped,
        }
    }

    fn mysql() -> Naming {
        Naming {
            default_schema: "shop".into(),
            catalog: None,
            keys: Keys::AsWritten,
        }
    }

    fn key(requested: &str, naming: &Naming) -> (String, TableName) {
        let name = parse_table_key(requested, naming).expect("a valid key");
        (result_key(requested, &name, naming), name)
    }

    fn table(schema: Option<&str>, table: &str) -> TableName {
        TableName {
            schema: schema.map(str::to_owned),
            table: table.into(),
        }
    }

    #[test]
    fn postgres_keys_drop_public_in_any_case_and_the_catalog() {
        for requested in ["users", "public.users", "PUBLIC.users", "Public.users"] {
            assert_eq!(
                key(requested, &postgres()),
                ("users".into(), table(None, "users")),
                "{requested}"
            );
        }
        assert_eq!(
            key("shop.public.users", &postgres()),
            ("users".into(), table(None, "users"))
        );
        assert_eq!(
            key("shop.sales.orders", &postgres()),
            ("sales.orders".into(), table(Some("sales"), "orders"))
        );
        assert_eq!(
            key("Sales.orders", &postgres()).0,
            "Sales.orders",
            "only the default schema is folded"
        );
    }

    #[test]
    fn mysql_keys_stay_as_written() {
        assert_eq!(
            key("shop.orders", &mysql()),
            ("shop.orders".into(), table(None, "orders")),
            "the connection database's table, under the key the job wrote"
        );
        assert_eq!(
            key("orders", &mysql()),
            ("orders".into(), table(None, "orders"))
        );
        assert_eq!(
            key("archive.orders", &mysql()),
            ("archive.orders".into(), table(Some("archive"), "orders"))
        );
        assert_eq!(
            key("SHOP.orders", &mysql()),
            ("SHOP.orders".into(), table(Some("SHOP"), "orders")),
            "database names match exactly"
        );
    }

    #[test]
    fn malformed_keys_are_refused() {
        let e = parse_table_key("other.public.users", &postgres()).unwrap_err();
        assert!(e.to_string().contains("names another database"), "{e}");
        let e = parse_table_key("shop.shop.orders", &mysql()).unwrap_err();
        assert!(e.to_string().contains("too many name parts"), "{e}");
        let e = parse_table_key("a.b.c.d", &postgres()).unwrap_err();
        assert!(e.to_string().contains("too many name parts"), "{e}");
        let e = parse_table_key("public.", &postgres()).unwrap_err();
        assert!(e.to_string().contains("empty name part"), "{e}");
    }
}

//! Plans: a job's tables, fields and filters checked against a datasource's real schema before
//! any query runs. Pure: the catalog is given, nothing here touches a server.

use std::collections::BTreeMap;

use contract::message::{FilterCondition, FilterValue, Operator};

use crate::catalog::{Catalog, Column, TableName};
use crate::error::{EngineError, Result};

/// The limits on one job (upstream defaults: 10, 20, 50).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_datasources: usize,
    pub max_tables_per_datasource: usize,
    pub max_fields_per_table: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_datasources: 10,
            max_tables_per_datasource: 20,
            max_fields_per_table: 50,
        }
    }
}

impl Limits {
    /// Whether a job's shape is within the limits: checked before anything is stored or run for
    /// it, so a message naming 100,000 datasources costs a count, not a plan.
    pub fn check(&self, mapped: &contract::message::MappedFields) -> Result<()> {
        let exceeded = |what, limit| Err(EngineError::LimitExceeded { what, limit });
        if mapped.len() > self.max_datasources {
            return exceeded("datasources", self.max_datasources);
        }
        for tables in mapped.values() {
            if tables.len() > self.max_tables_per_datasource {
                return exceeded("tables per datasource", self.max_tables_per_datasource);
            }
            // Fields are counted as the plan counts them: a name given twice is one field.
            let distinct = |fields: &Vec<String>| {
                fields
                    .iter()
                    .collect::<std::collections::BTreeSet<_>>()
                    .len()
            };
            if tables
                .values()
                .any(|f| distinct(f) > self.max_fields_per_table)
            {
                return exceeded("fields per table", self.max_fields_per_table);
            }
        }
        Ok(())
    }
}

/// How a datasource names tables: its default schema (stripped from result keys) and the name
/// a three-part `catalog.schema.table` key must carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Naming {
    pub default_schema: String,
    /// `None` when the datasource takes no catalog part (MySQL).
    pub catalog: Option<String>,
}

/// One table to extract.
#[derive(Debug, Clone, PartialEq)]
pub struct TablePlan {
    /// The table's key in the result JSON (default schema stripped).
    pub key: String,
    pub name: TableName,
    /// The schema (MySQL: database) the catalog found the table in; the SQL names it, so
    /// nothing resolves through a search path.
    pub schema: String,
    /// Selected columns, sorted by name (the order Go writes a row's keys in), no duplicates.
    pub columns: Vec<Column>,
    pub predicates: Vec<Predicate>,
}

/// One filter operator applied to one column.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    pub column: Column,
    pub op: Operator,
    pub values: Vec<FilterValue>,
}

/// Splits a requested table key into its name, after the length limits were checked.
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
    let schema = schema.filter(|s| *s != naming.default_schema);
    Ok(TableName {
        schema: schema.map(str::to_owned),
        table: table.to_owned(),
    })
}

/// The result key of a table: `table`, or `schema.table` outside the default schema.
pub fn table_key(name: &TableName) -> String {
    match &name.schema {
        Some(schema) => format!("{schema}.{}", name.table),
        None => name.table.clone(),
    }
}

/// Builds the plan of one datasource: every requested table, field and filter must exist in
/// `catalog`. Tables come out sorted by result key.
pub fn plan_datasource(
    connection: &str,
    tables: &BTreeMap<String, Vec<String>>,
    filters: Option<&BTreeMap<String, BTreeMap<String, FilterCondition>>>,
    catalog: &Catalog,
    naming: &Naming,
    limits: &Limits,
) -> Result<Vec<TablePlan>> {
    let schema_error = |detail: String| EngineError::Schema {
        connection: connection.to_owned(),
        detail,
    };
    if tables.len() > limits.max_tables_per_datasource {
        return Err(EngineError::LimitExceeded {
            what: "tables per datasource",
            limit: limits.max_tables_per_datasource,
        });
    }

    let mut plans: BTreeMap<String, TablePlan> = BTreeMap::new();
    let mut requested_as: BTreeMap<String, &str> = BTreeMap::new();
    for (requested, fields) in tables {
        let name =
            parse_table_key(requested, naming).map_err(|e| with_connection(e, connection))?;
        let key = table_key(&name);
        if let Some(previous) = requested_as.insert(key.clone(), requested) {
            return Err(schema_error(format!(
                "tables {previous:?} and {requested:?} are the same table"
            )));
        }
        let found = catalog
            .tables
            .get(&name)
            .ok_or_else(|| schema_error(format!("table {requested:?} does not exist")))?;
        let available = found.columns.as_slice();
        let mut selected: Vec<&str> = fields.iter().map(String::as_str).collect();
        selected.sort_unstable();
        selected.dedup();
        if selected.len() > limits.max_fields_per_table {
            return Err(EngineError::LimitExceeded {
                what: "fields per table",
                limit: limits.max_fields_per_table,
            });
        }
        let columns = selected
            .into_iter()
            .map(|field| {
                find_column(available, field).cloned().ok_or_else(|| {
                    schema_error(format!(
                        "field {field:?} does not exist in table {requested:?}"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        plans.insert(
            key.clone(),
            TablePlan {
                key,
                name,
                schema: found.schema.clone(),
                columns,
                predicates: Vec::new(),
            },
        );
    }

    for (requested, fields) in filters.into_iter().flatten() {
        let name =
            parse_table_key(requested, naming).map_err(|e| with_connection(e, connection))?;
        let plan = plans
            .get_mut(&table_key(&name))
            .ok_or_else(|| EngineError::Filter {
                detail: format!("on {connection}.{requested}: the table is not in mappedFields"),
            })?;
        let available = catalog.columns(&name).unwrap_or_default();
        for (field, condition) in fields {
            let column = find_column(available, field).ok_or_else(|| {
                schema_error(format!(
                    "filter field {field:?} does not exist in table {requested:?}"
                ))
            })?;
            for (op, values) in condition.clauses() {
                plan.predicates.push(Predicate {
                    column: column.clone(),
                    op,
                    values: values.to_vec(),
                });
            }
        }
    }
    Ok(plans.into_values().collect())
}

fn find_column<'a>(columns: &'a [Column], name: &str) -> Option<&'a Column> {
    columns.iter().find(|c| c.name == name)
}

fn with_connection(error: EngineError, connection: &str) -> EngineError {
    match error {
        EngineError::Schema { detail, .. } => EngineError::Schema {
            connection: connection.to_owned(),
            detail,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests;

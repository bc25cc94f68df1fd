//! Plans: a job's tables, fields and filters checked against a datasource's real schema before
//! any query runs. Pure: the catalog is given, nothing here touches a server.

use std::collections::BTreeMap;

use contract::message::{FilterCondition, FilterValue, Operator};

use crate::catalog::{Catalog, Column, TableName};
use crate::error::{EngineError, Result};

mod naming;

pub use naming::{parse_table_key, result_key, Keys, Naming};

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

/// One table to extract.
#[derive(Debug, Clone, PartialEq)]
pub struct TablePlan {
    /// The table's key in the result JSON ([`result_key`]).
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

/// Builds the plan of one datasource: every requested table, field and filter must exist in
/// `catalog`. Tables come out sorted by result key, one plan per key.
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

    // Keys naming one table under one result key (PostgreSQL `t` and `public.t`) are merged, as
    // the Go Worker merges them: their fields are united, each column once in the order first
    // seen, then sorted, since a row writes its keys sorted. The union is what the limit counts.
    let mut plans: BTreeMap<String, TablePlan> = BTreeMap::new();
    for (requested, fields) in tables {
        let name =
            parse_table_key(requested, naming).map_err(|e| with_connection(e, connection))?;
        let key = result_key(requested, &name, naming);
        let found = catalog
            .tables
            .get(&name)
            .ok_or_else(|| schema_error(format!("table {requested:?} does not exist")))?;
        let plan = plans.entry(key.clone()).or_insert_with(|| TablePlan {
            key,
            name,
            schema: found.schema.clone(),
            columns: Vec::new(),
            predicates: Vec::new(),
        });
        for field in fields {
            if plan.columns.iter().any(|c| c.name == *field) {
                continue;
            }
            let column = found.column(field).ok_or_else(|| {
                schema_error(format!(
                    "field {field:?} does not exist in table {requested:?}"
                ))
            })?;
            if plan.columns.len() == limits.max_fields_per_table {
                return Err(EngineError::LimitExceeded {
                    what: "fields per table",
                    limit: limits.max_fields_per_table,
                });
            }
            plan.columns.push(column);
        }
    }
    for plan in plans.values_mut() {
        plan.columns.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    }

    // Filters find their table by result key too; two filters on one merged table both apply.
    for (requested, fields) in filters.into_iter().flatten() {
        let name =
            parse_table_key(requested, naming).map_err(|e| with_connection(e, connection))?;
        let plan = plans
            .get_mut(&result_key(requested, &name, naming))
            .ok_or_else(|| EngineError::Filter {
                detail: format!("on {connection}.{requested}: the table is not in mappedFields"),
            })?;
        for (field, condition) in fields {
            let column = catalog.column(&name, field).ok_or_else(|| {
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

//! SQL text for a table plan: quoted identifiers, and every filter value a bound parameter.

use chrono::NaiveDate;
use contract::message::{FilterValue, Operator};

use crate::catalog::{Column, ValueKind};
use crate::plan::{Predicate, TablePlan};

/// The SQL dialect of a datasource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Postgres,
    MySql,
    /// `[]` quotes, `@P1…` parameters, `LIKE … ESCAPE '\'`.
    SqlServer,
}

/// A parameter to bind. PostgreSQL gets every value as text and casts it to the column's type
/// in SQL (its typed protocol would refuse `'42'` for an integer otherwise); MySQL converts
/// and SQL Server convert natively and get the JSON types.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    Text(String),
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
}

/// A statement and its parameters, in placeholder order.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub sql: String,
    pub params: Vec<Param>,
}

impl Dialect {
    /// Quotes an identifier by the dialect's rules: the closing quote character is doubled
    /// inside (`"`, `` ` ``, or SQL Server's `]` of `[…]`).
    pub fn quote(self, ident: &str) -> String {
        let (open, q) = match self {
            Dialect::Postgres => ('"', '"'),
            Dialect::MySql => ('`', '`'),
            Dialect::SqlServer => ('[', ']'),
        };
        let mut out = String::with_capacity(ident.len() + 2);
        out.push(open);
        for c in ident.chars() {
            if c == q {
                out.push(q);
            }
            out.push(c);
        }
        out.push(q);
        out
    }

    /// The table, always qualified with the schema the catalog found it in: an unqualified
    /// name would resolve through PostgreSQL's `search_path` (`pg_catalog` and the user's own
    /// schema before `public`), not necessarily to the table that was validated.
    fn table(self, plan: &TablePlan) -> String {
        format!(
            "{}.{}",
            self.quote(&plan.schema),
            self.quote(&plan.name.table)
        )
    }

    /// The `SELECT` of a plan; `select_expr(column, quoted)` gives each column's expression
    /// (a cast where the datasource reads a type as text).
    pub fn select(self, plan: &TablePlan, select_expr: impl Fn(&Column, &str) -> String) -> Query {
        let columns: Vec<String> = plan
            .columns
            .iter()
            .map(|c| select_expr(c, &self.quote(&c.name)))
            .collect();
        let mut builder = Builder {
            dialect: self,
            params: Vec::new(),
        };
        let conditions: Vec<String> = plan
            .predicates
            .iter()
            .map(|p| builder.condition(p))
            .collect();
        let mut sql = format!("SELECT {} FROM {}", columns.join(", "), self.table(plan));
        if !conditions.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&conditions.join(" AND "));
        }
        Query {
            sql,
            params: builder.params,
        }
    }
}

struct Builder {
    dialect: Dialect,
    params: Vec<Param>,
}

impl Builder {
    /// Binds a value and returns the SQL that stands for it, typed as `column`.
    fn bind(&mut self, column: &Column, value: &FilterValue) -> String {
        match self.dialect {
            Dialect::Postgres => {
                self.params.push(Param::Text(text_of(value)));
                format!("CAST(${} AS {})", self.params.len(), column.db_type)
            }
            Dialect::MySql => {
                self.params.push(native(value));
                "?".to_owned()
            }
            Dialect::SqlServer => {
                self.params.push(native(value));
                format!("@P{}", self.params.len())
            }
        }
    }

    fn bind_text(&mut self, text: String) -> String {
        self.params.push(Param::Text(text));
        match self.dialect {
            Dialect::Postgres => format!("${}", self.params.len()),
            Dialect::MySql => "?".to_owned(),
            Dialect::SqlServer => format!("@P{}", self.params.len()),
        }
    }

    fn list(&mut self, column: &Column, values: &[FilterValue]) -> String {
        let items: Vec<String> = values.iter().map(|v| self.bind(column, v)).collect();
        items.join(", ")
    }

    fn condition(&mut self, p: &Predicate) -> String {
        let col = self.dialect.quote(&p.column.name);
        let first = &p.values[..p.values.len().min(1)];
        match p.op {
            Operator::Eq if p.values.len() == 1 => {
                format!("{col} = {}", self.bind(&p.column, &p.values[0]))
            }
            Operator::Eq | Operator::In => {
                format!("{col} IN ({})", self.list(&p.column, &p.values))
            }
            Operator::Nin => format!("{col} NOT IN ({})", self.list(&p.column, &p.values)),
            Operator::Ne => {
                let parts: Vec<String> = p
                    .values
                    .iter()
                    .map(|v| format!("{col} <> {}", self.bind(&p.column, v)))
                    .collect();
                format!("({})", parts.join(" AND "))
            }
            Operator::Gt => format!("{col} > {}", self.list(&p.column, first)),
            Operator::Gte => format!("{col} >= {}", self.list(&p.column, first)),
            Operator::Lt => format!("{col} < {}", self.list(&p.column, first)),
            Operator::Lte => format!("{col} <= {}", self.list(&p.column, first)),
            Operator::Between => {
                let low = self.bind(&p.column, &p.values[0]);
                match whole_day_end(&p.column, &p.values[1]) {
                    Some(next_day) => {
                        let high = self.bind(&p.column, &FilterValue::String(next_day));
                        format!("({col} >= {low} AND {col} < {high})")
                    }
                    None => {
                        let high = self.bind(&p.column, &p.values[1]);
                        format!("({col} >= {low} AND {col} <= {high})")
                    }
                }
            }
            Operator::Like => {
                let text = text_of(&p.values[0]);
                match self.dialect {
                    Dialect::Postgres => {
                        format!("CAST({col} AS text) LIKE {}", self.bind_text(text))
                    }
                    Dialect::MySql => format!("{col} LIKE {}", self.bind_text(text)),
                    Dialect::SqlServer => {
                        let pattern = self.bind_text(crate::like::like_to_tsql(&text));
                        format!("{col} LIKE {pattern} ESCAPE '\\'")
                    }
                }
            }
        }
    }
}

/// For a date-like column and a `YYYY-MM-DD` upper bound, the next day: `between` then covers
/// the whole end day (`< next day`), not just its first instant.
fn whole_day_end(column: &Column, upper: &FilterValue) -> Option<String> {
    if !matches!(
        column.kind,
        ValueKind::Date | ValueKind::Timestamp | ValueKind::TimestampTz
    ) {
        return None;
    }
    let FilterValue::String(text) = upper else {
        return None;
    };
    if text.len() != 10 {
        return None;
    }
    let day = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    Some(day.succ_opt()?.format("%Y-%m-%d").to_string())
}

fn text_of(value: &FilterValue) -> String {
    match value {
        FilterValue::Bool(b) => b.to_string(),
        FilterValue::Number(n) => n.to_string(),
        FilterValue::String(s) => s.clone(),
    }
}

fn native(value: &FilterValue) -> Param {
    match value {
        FilterValue::Bool(b) => Param::Bool(*b),
        FilterValue::String(s) => Param::Text(s.clone()),
        FilterValue::Number(n) => {
            if let Some(i) = n.as_i64() {
                Param::Int(i)
            } else if let Some(u) = n.as_u64() {
                Param::UInt(u)
            } else {
                Param::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
    }
}

#[cfg(test)]
mod tests;

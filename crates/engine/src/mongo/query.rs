//! A table plan as a MongoDB `find`: the filter and the projection, every filter value a typed
//! BSON value under an explicit operator, every field a checked document path.
//!
//! Nothing of a job reaches the server as an operator: a value is only ever the operand of the
//! operator this module chose (`{path: {"$eq": value}}`, never `{path: value}`), values are JSON
//! scalars (a string stays a string, even `"$where"`), and a field whose path has a segment
//! starting with `$`, an empty segment or a NUL is refused before any query. `like` becomes an
//! anchored regex with every metacharacter escaped whose segments sit in atomic groups
//! ([`crate::like`]), so that no pattern can make the server backtrack; its length and wildcards
//! are bounded as well.

use contract::message::{FilterValue, Operator};
use mongodb::bson::{doc, Bson, Document};

use crate::like::{like_to_regex, percent_runs};
use crate::plan::{Predicate, TablePlan};

/// The longest `like` pattern, in characters.
pub(crate) const MAX_LIKE_CHARS: usize = 1024;
/// The most runs of `%` in one `like` pattern. The regex's atomic groups already keep the work
/// per value linear; this bound is kept as upstream-sized patterns never need more.
pub(crate) const MAX_LIKE_WILDCARDS: usize = 8;
/// The most values one operator may carry.
pub(crate) const MAX_VALUES: usize = 10_000;
/// The longest document path, in bytes.
pub(crate) const MAX_PATH_BYTES: usize = 1024;

/// Why a plan cannot be a MongoDB query: the text of a filter or schema error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum QueryError {
    /// A field is not a document path.
    Path(String),
    /// A filter cannot be expressed safely.
    Filter(String),
}

/// Checks that `field` is a document path: dot-separated non-empty segments, none starting
/// with `$`, no NUL, at most [`MAX_PATH_BYTES`].
pub(crate) fn check_path(field: &str) -> Result<(), QueryError> {
    let bad = |why: &str| Err(QueryError::Path(format!("field {field:?} {why}")));
    if field.is_empty() || field.len() > MAX_PATH_BYTES {
        return bad("is not a document path of 1 to 1024 bytes");
    }
    if field.contains('\0') {
        return bad("contains a NUL");
    }
    for segment in field.split('.') {
        if segment.is_empty() {
            return bad("has an empty path segment");
        }
        if segment.starts_with('$') {
            return bad("names an operator ($...), not a document path");
        }
    }
    Ok(())
}

/// The projection of a plan's fields: each path, and `_id` only when asked for. Two fields of
/// which one is inside the other (`a` and `a.b`) are refused, as the server would. `None` when
/// the plan selects no field: whole documents, as upstream reads them.
pub(crate) fn projection(plan: &TablePlan) -> Result<Option<Document>, QueryError> {
    if plan.columns.is_empty() {
        return Ok(None);
    }
    let mut projection = Document::new();
    for (i, column) in plan.columns.iter().enumerate() {
        check_path(&column.name)?;
        for other in &plan.columns[i + 1..] {
            let (a, b) = (column.name.as_str(), other.name.as_str());
            let inside = |outer: &str, inner: &str| {
                inner.len() > outer.len()
                    && inner.starts_with(outer)
                    && inner.as_bytes()[outer.len()] == b'.'
            };
            if inside(a, b) || inside(b, a) {
                return Err(QueryError::Path(format!(
                    "fields {a:?} and {b:?} overlap: ask for one of them"
                )));
            }
        }
        projection.insert(column.name.clone(), 1);
    }
    let asks_for_id = plan
        .columns
        .iter()
        .any(|c| c.name == "_id" || c.name.starts_with("_id."));
    if !asks_for_id {
        projection.insert("_id", 0);
    }
    Ok(Some(projection))
}

/// The filter of a plan: the AND of every predicate (an empty document without any).
pub(crate) fn filter(plan: &TablePlan) -> Result<Document, QueryError> {
    let mut all = Vec::with_capacity(plan.predicates.len());
    for predicate in &plan.predicates {
        check_path(&predicate.column.name)?;
        all.push(Bson::Document(condition(predicate)?));
    }
    Ok(match all.len() {
        0 => Document::new(),
        _ => doc! { "$and": all },
    })
}

fn condition(p: &Predicate) -> Result<Document, QueryError> {
    if p.values.len() > MAX_VALUES {
        return Err(QueryError::Filter(format!(
            "{} on {:?} has {} values; at most {MAX_VALUES} are allowed",
            p.op.name(),
            p.column.name,
            p.values.len()
        )));
    }
    let first = || p.values.first().map(bson_of).unwrap_or(Bson::Null);
    let all = || Bson::Array(p.values.iter().map(bson_of).collect());
    let operand = match p.op {
        Operator::Eq if p.values.len() == 1 => doc! { "$eq": first() },
        Operator::Eq | Operator::In => doc! { "$in": all() },
        Operator::Nin | Operator::Ne => doc! { "$nin": all() },
        Operator::Gt => doc! { "$gt": first() },
        Operator::Gte => doc! { "$gte": first() },
        Operator::Lt => doc! { "$lt": first() },
        Operator::Lte => doc! { "$lte": first() },
        Operator::Between => {
            let high = p.values.get(1).map(bson_of).unwrap_or(Bson::Null);
            doc! { "$gte": first(), "$lte": high }
        }
        Operator::Like => {
            // The message's validation keeps `like` to one string.
            let pattern = match p.values.first() {
                Some(FilterValue::String(text)) => text.clone(),
                Some(FilterValue::Number(n)) => n.to_string(),
                Some(FilterValue::Bool(b)) => b.to_string(),
                None => String::new(),
            };
            check_like(&p.column.name, &pattern)?;
            doc! { "$regex": like_to_regex(&pattern), "$options": "s" }
        }
    };
    let mut condition = Document::new();
    condition.insert(p.column.name.clone(), operand);
    Ok(condition)
}

fn check_like(field: &str, pattern: &str) -> Result<(), QueryError> {
    if pattern.chars().count() > MAX_LIKE_CHARS {
        return Err(QueryError::Filter(format!(
            "like on {field:?}: the pattern is longer than {MAX_LIKE_CHARS} characters"
        )));
    }
    let runs = percent_runs(pattern);
    if runs > MAX_LIKE_WILDCARDS {
        return Err(QueryError::Filter(format!(
            "like on {field:?}: the pattern has {runs} runs of %; at most {MAX_LIKE_WILDCARDS} \
             are allowed"
        )));
    }
    Ok(())
}

/// A filter value as the BSON value it is compared with: a string stays a string, an integer
/// is an Int64 (MongoDB compares numbers across their types), any other number a Double.
fn bson_of(value: &FilterValue) -> Bson {
    match value {
        FilterValue::Bool(b) => Bson::Boolean(*b),
        FilterValue::String(s) => Bson::String(s.clone()),
        FilterValue::Number(n) => match n.as_i64() {
            Some(i) => Bson::Int64(i),
            None => Bson::Double(n.as_f64().unwrap_or(f64::NAN)),
        },
    }
}

#[cfg(test)]
mod tests;

//! Inbound job messages (contract §4): decoding with Go's rules, validation, job id recovery.

mod error;
mod filter;
mod fold;
mod recover;

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use uuid::Uuid;

pub use error::MessageError;
pub use filter::{FilterCondition, FilterValue, Operator};
pub use recover::{check_header, recover_job_id, JobIdMismatch};

use crate::json::{JsonWriter, Style};
use crate::node::Node;
use filter::wrong_type;

/// Tables to extract per connection: `connection → table → fields`.
pub type MappedFields = BTreeMap<String, BTreeMap<String, Vec<String>>>;
/// Conditions per connection: `connection → table → field → condition`.
pub type Filters = BTreeMap<String, BTreeMap<String, BTreeMap<String, FilterCondition>>>;

/// A decoded and validated extraction job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobMessage {
    pub job_id: Uuid,
    pub mapped_fields: MappedFields,
    pub filters: Filters,
    /// Carried through untouched to the job's events (`{}` when absent).
    pub metadata: Map<String, Value>,
    /// `timeoutSeconds` (lifecycle §2): how long the run may take, from its first start;
    /// `None`: the Worker's default (`ENGINE_EXTRACTION_TIMEOUT_SEC`).
    pub timeout_seconds: Option<u32>,
}

/// The longest `timeoutSeconds` a job may ask for (a day, as lifecycle §2 says).
pub const MAX_TIMEOUT_SECONDS: u32 = 86_400;

impl JobMessage {
    /// Decodes a message body the way the Go Worker does (member names match case-insensitively,
    /// unknown members are ignored, a repeated member is applied again), then validates it.
    pub fn parse(body: &[u8]) -> Result<JobMessage, MessageError> {
        let root = decode_tree(body)?;
        let Node::Object(members) = root else {
            return Err(MessageError::NotAnObject(root.kind()));
        };
        // No datasource identifier can hold a NUL, and PostgreSQL text and jsonb refuse it: a
        // message carrying one could be neither run nor stored, so it is refused whole.
        if members
            .iter()
            .any(|(name, value)| name.contains('\0') || value.has_nul())
        {
            return Err(MessageError::NulCharacter);
        }

        let mut job_id = None;
        let mut mapped_fields: Option<MappedFields> = None;
        let mut filters: Option<Filters> = None;
        let mut metadata: Option<Map<String, Value>> = None;
        let mut timeout_seconds = None;
        for (name, value) in members {
            if fold::matches(&name, "jobId") {
                // Go leaves a UUID untouched when the member is null.
                if let Some(id) = decode_job_id(value)? {
                    job_id = Some(id);
                }
            } else if fold::matches(&name, "mappedFields") {
                // Go decodes a repeated map member into the same map: entries accumulate,
                // and null resets it.
                merge(&mut mapped_fields, decode_mapped_fields(value)?);
            } else if fold::matches(&name, "filters") {
                merge(&mut filters, decode_filters(value)?);
            } else if fold::matches(&name, "metadata") {
                merge(&mut metadata, decode_metadata(value)?);
            } else if fold::matches(&name, "timeoutSeconds") {
                // As Go's `int`: null leaves it as it was; only an integer literal decodes.
                if let Some(seconds) = decode_timeout(value)? {
                    timeout_seconds = Some(seconds);
                }
            }
        }

        let job_id = job_id.ok_or(MessageError::MissingJobId)?;
        if job_id.is_nil() {
            return Err(MessageError::NilJobId);
        }
        let mapped_fields = mapped_fields.unwrap_or_default();
        validate_mapped_fields(&mapped_fields)?;
        Ok(JobMessage {
            job_id,
            mapped_fields,
            filters: filters.unwrap_or_default(),
            metadata: metadata.unwrap_or_default(),
            timeout_seconds,
        })
    }
}

impl JobMessage {
    /// Refuses metadata whose compact JSON (as every event of the job carries it) is longer
    /// than `limit` bytes, so one message cannot make every event it causes that large.
    pub fn check_metadata_size(&self, limit: u64) -> Result<(), MessageError> {
        let bytes = metadata_bytes(&self.metadata);
        if bytes > limit {
            return Err(MessageError::MetadataTooLarge { bytes, limit });
        }
        Ok(())
    }
}

/// The length of `metadata` written as Go's compact JSON, counted without writing it anywhere.
fn metadata_bytes(metadata: &Map<String, Value>) -> u64 {
    let mut writer = JsonWriter::new(Counter(0), Style::Compact);
    let written = writer.begin_object().and_then(|()| {
        metadata
            .iter()
            .try_for_each(|(key, value)| writer.key(key).and_then(|()| writer.value(value)))
    });
    let written = written.and_then(|()| writer.end_object());
    // Writing into a counter cannot fail, and the calls above are well-formed: should that
    // ever change, the metadata is counted as too large rather than let through.
    match written.and_then(|()| writer.finish()) {
        Ok(Counter(bytes)) => bytes,
        Err(_) => u64::MAX,
    }
}

/// An `io::Write` that only counts.
struct Counter(u64);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The most JSON values a job message may hold. The largest job the limits allow (10 datasources,
/// 20 tables, 50 fields each, with 64 KiB of metadata) holds about 30,000; beyond this the
/// message is refused before it is decoded, so its tree stays a few MiB whatever its shape.
pub const MAX_MESSAGE_VALUES: u64 = 100_000;

/// Decodes a body into a tree, once a shallow scan has bounded what the tree would hold.
pub(crate) fn decode_tree(body: &[u8]) -> Result<Node, MessageError> {
    match crate::envelope::json_values(body) {
        Some(values) if values > MAX_MESSAGE_VALUES => Err(MessageError::TooManyValues {
            values,
            limit: MAX_MESSAGE_VALUES,
        }),
        Some(_) => {
            serde_json::from_slice(body).map_err(|e| MessageError::InvalidJson(e.to_string()))
        }
        // Not JSON at all: the decoder's own words for it, from a pass that builds nothing.
        None => Err(MessageError::InvalidJson(
            serde_json::from_slice::<serde::de::IgnoredAny>(body)
                .err()
                .map_or_else(|| "not one JSON document".to_owned(), |e| e.to_string()),
        )),
    }
}

fn merge<T>(target: &mut Option<T>, decoded: Option<T>)
where
    T: IntoIterator + Extend<<T as IntoIterator>::Item>,
{
    match (target.as_mut(), decoded) {
        (_, None) => *target = None,
        (Some(existing), Some(more)) => existing.extend(more),
        (None, Some(more)) => *target = Some(more),
    }
}

fn decode_job_id(node: Node) -> Result<Option<Uuid>, MessageError> {
    match node {
        Node::Null => Ok(None),
        Node::String(text) => Uuid::parse_str(&text)
            .map(Some)
            .map_err(|_| MessageError::InvalidJobId),
        other => Err(wrong_type("jobId", "a UUID string", &other)),
    }
}

fn decode_timeout(node: Node) -> Result<Option<u32>, MessageError> {
    match node {
        Node::Null => Ok(None),
        Node::Number(number) => number
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| (1..=MAX_TIMEOUT_SECONDS).contains(n))
            .map(Some)
            .ok_or(MessageError::InvalidTimeout),
        other => Err(wrong_type("timeoutSeconds", "an integer", &other)),
    }
}

fn decode_metadata(node: Node) -> Result<Option<Map<String, Value>>, MessageError> {
    match node {
        Node::Null => Ok(None),
        Node::Object(members) => Ok(Some(crate::node::into_map(members))),
        other => Err(wrong_type("metadata", "an object", &other)),
    }
}

/// The members of an object node, `None` for null, in document order.
fn object(node: Node, path: &str) -> Result<Option<Vec<(String, Node)>>, MessageError> {
    match node {
        Node::Null => Ok(None),
        Node::Object(members) => Ok(Some(members)),
        other => Err(wrong_type(path, "an object", &other)),
    }
}

fn decode_mapped_fields(node: Node) -> Result<Option<MappedFields>, MessageError> {
    let Some(connections) = object(node, "mappedFields")? else {
        return Ok(None);
    };
    let mut mapped = MappedFields::new();
    for (connection, tables_node) in connections {
        let path = format!("mappedFields.{connection}");
        let mut tables = BTreeMap::new();
        for (table, fields_node) in object(tables_node, &path)?.unwrap_or_default() {
            let path = format!("{path}.{table}");
            let fields = match fields_node {
                Node::Null => Vec::new(),
                Node::Array(items) => items
                    .into_iter()
                    .map(|item| match item {
                        Node::String(field) => Ok(field),
                        other => Err(wrong_type(&path, "an array of field names", &other)),
                    })
                    .collect::<Result<_, _>>()?,
                other => return Err(wrong_type(&path, "an array of field names", &other)),
            };
            tables.insert(table, fields);
        }
        mapped.insert(connection, tables);
    }
    Ok(Some(mapped))
}

fn decode_filters(node: Node) -> Result<Option<Filters>, MessageError> {
    let Some(connections) = object(node, "filters")? else {
        return Ok(None);
    };
    let mut filters = Filters::new();
    for (connection, tables_node) in connections {
        let path = format!("filters.{connection}");
        let mut tables = BTreeMap::new();
        for (table, fields_node) in object(tables_node, &path)?.unwrap_or_default() {
            let path = format!("{path}.{table}");
            let mut fields = BTreeMap::new();
            for (field, condition) in object(fields_node, &path)?.unwrap_or_default() {
                let path = format!("{path}.{field}");
                fields.insert(field, FilterCondition::from_node(condition, &path)?);
            }
            tables.insert(table, fields);
        }
        filters.insert(connection, tables);
    }
    Ok(Some(filters))
}

fn validate_mapped_fields(mapped: &MappedFields) -> Result<(), MessageError> {
    if mapped.is_empty() {
        return Err(MessageError::MissingMappedFields);
    }
    for (connection, tables) in mapped {
        if connection.is_empty() {
            return Err(MessageError::EmptyName {
                path: "mappedFields connection name".into(),
            });
        }
        if tables.is_empty() {
            return Err(MessageError::ConnectionWithoutTables {
                connection: connection.clone(),
            });
        }
        for (table, fields) in tables {
            if table.is_empty() {
                return Err(MessageError::EmptyName {
                    path: format!("mappedFields.{connection} table name"),
                });
            }
            if fields.is_empty() {
                return Err(MessageError::TableWithoutFields {
                    connection: connection.clone(),
                    table: table.clone(),
                });
            }
            if fields.iter().any(String::is_empty) {
                return Err(MessageError::EmptyName {
                    path: format!("mappedFields.{connection}.{table} field name"),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

//! The result JSON (contract §6), streamed: rows go from a datasource cursor into the
//! Go-compatible writer, never into a tree of values.
//!
//! Each datasource writes its connection's value into its own buffer, so datasources can run
//! in parallel; the buffers are joined in connection-name order at the end. The first buffer
//! already starts with the document's opening, so a single-datasource job is never copied.

mod budget;
mod values;

use std::sync::Arc;

use contract::json::{JsonError, JsonWriter, Style};

pub use budget::Budget;
pub(crate) use values::{
    from_micros, write_base64, write_date, write_float, write_float32, write_json_text,
    write_timestamp,
};

use crate::error::{EngineError, Result};
use crate::watch::Progress;

/// The finished plaintext of a job's result.
#[derive(Debug)]
pub struct Extraction {
    pub plaintext: Vec<u8>,
    pub row_count: u64,
}

impl Extraction {
    pub fn size_bytes(&self) -> u64 {
        self.plaintext.len() as u64
    }
}

/// One connection's value, `{"<table>": [rows], ...}`, at nesting depth 1 of the document.
pub struct ConnectionResult {
    writer: JsonWriter<Vec<u8>>,
    budget: Arc<Budget>,
    /// Bytes of the buffer already charged to the budget.
    charged: usize,
    rows: u64,
    /// A started table whose first row has not come yet: nothing of it is written so far.
    pending_table: Option<String>,
    table_open: bool,
    /// Reports the rows read so far, when someone watches.
    progress: Option<Progress>,
}

/// A connection's finished part of the document.
#[derive(Debug)]
pub struct Part {
    bytes: Vec<u8>,
    rows: u64,
}

impl ConnectionResult {
    /// `first`: whether this connection sorts first in the document; its buffer then carries
    /// the document's opening `{`.
    pub fn new(name: &str, first: bool, budget: Arc<Budget>) -> Result<Self> {
        let mut out = Vec::with_capacity(64 * 1024);
        out.extend_from_slice(if first { b"{\n  " } else { b",\n  " });
        let mut key = JsonWriter::new(&mut out, Style::Indented);
        key.string(name).map_err(json_error)?;
        out.extend_from_slice(b": ");
        let mut writer = JsonWriter::nested(out, Style::Indented, 1);
        writer.begin_object().map_err(json_error)?;
        Ok(ConnectionResult {
            writer,
            budget,
            charged: 0,
            rows: 0,
            pending_table: None,
            table_open: false,
            progress: None,
        })
    }

    /// Reports its rows through `progress` as they come.
    pub(crate) fn watched(mut self, progress: Progress) -> Self {
        self.progress = Some(progress);
        self
    }

    /// Starts a table. Nothing is written until its first row: a table without rows is absent.
    pub fn start_table(&mut self, key: &str) -> Result<()> {
        self.end_table()?;
        self.pending_table = Some(key.to_owned());
        Ok(())
    }

    /// Opens a row object; write its members, then call [`end_row`](Self::end_row).
    #[inline]
    pub fn begin_row(&mut self) -> Result<&mut JsonWriter<Vec<u8>>> {
        if let Some(key) = self.pending_table.take() {
            self.writer.key(&key).map_err(json_error)?;
            self.writer.begin_array().map_err(json_error)?;
            self.table_open = true;
        }
        self.writer.begin_object().map_err(json_error)?;
        Ok(&mut self.writer)
    }

    /// Closes the row and charges its bytes to the job's budget.
    #[inline]
    pub fn end_row(&mut self) -> Result<()> {
        self.writer.end_object().map_err(json_error)?;
        self.rows += 1;
        if let Some(progress) = &mut self.progress {
            progress.row(self.rows);
        }
        self.charge()
    }

    fn end_table(&mut self) -> Result<()> {
        self.pending_table = None;
        if self.table_open {
            self.writer.end_array().map_err(json_error)?;
            self.table_open = false;
        }
        Ok(())
    }

    fn charge(&mut self) -> Result<()> {
        let len = self.writer.get_ref().len();
        let delta = len - self.charged;
        self.charged = len;
        self.budget.charge(delta as u64)
    }

    /// Closes the connection's object.
    pub fn finish(mut self) -> Result<Part> {
        self.end_table()?;
        self.writer.end_object().map_err(json_error)?;
        self.charge()?;
        let bytes = self.writer.finish().map_err(json_error)?;
        Ok(Part {
            bytes,
            rows: self.rows,
        })
    }
}

impl Part {
    /// The rows it holds.
    pub fn rows(&self) -> u64 {
        self.rows
    }
}

/// Joins the connections' parts, given in connection-name order, into the document.
pub fn join(parts: Vec<Part>, budget: &Budget) -> Result<Extraction> {
    let mut parts = parts.into_iter();
    let Some(first) = parts.next() else {
        budget.charge(2)?;
        return Ok(Extraction {
            plaintext: b"{}".to_vec(),
            row_count: 0,
        });
    };
    let mut row_count = first.rows;
    let mut plaintext = first.bytes;
    for part in parts {
        plaintext.extend_from_slice(&part.bytes);
        row_count += part.rows;
    }
    plaintext.extend_from_slice(b"\n}");
    budget.charge(2)?;
    Ok(Extraction {
        plaintext,
        row_count,
    })
}

fn json_error(error: JsonError) -> EngineError {
    EngineError::Result(error.to_string())
}

#[cfg(test)]
mod go_reference;
#[cfg(test)]
mod tests;

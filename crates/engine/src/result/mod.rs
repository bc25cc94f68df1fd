//! The result JSON (contract §6), streamed: rows go from a datasource cursor into the
//! Go-compatible writer, and from it, in chunks, out of the engine, never into a tree of values
//! nor into one buffer holding the whole document.
//!
//! Each datasource writes its connection's value through its own [`ConnectionResult`], so
//! datasources can run in parallel; the private `assemble` module puts their chunks out in
//! connection-name order, the first one straight through and the others spooled (memory, then
//! an unnamed temporary file) until their turn. The first part starts with the document's
//! opening, so no byte is copied to build the document.

mod assemble;
mod budget;
mod spool;
mod values;

use std::sync::Arc;

use contract::json::{EncodedKey, JsonError, JsonWriter, Style};
use tokio::sync::mpsc;

pub(crate) use assemble::Assembly;
pub use budget::Budget;
pub(crate) use spool::SpillPlace;
pub use spool::{probe_spill_dir, SpillStats};
pub(crate) use values::{
    write_base64, write_date, write_float, write_float32, write_json_text, write_micros,
    write_timestamp,
};

use crate::error::{EngineError, Result};
use crate::watch::Progress;

/// Bytes a datasource writes before handing them on as one chunk.
pub const CHUNK_BYTES: usize = 128 * 1024;

/// Nesting depth of a row's members: the connection's value is a member of the document (1),
/// its tables members of it (2), a table's rows elements of those (3), their columns members
/// of a row (4).
const ROW_MEMBER_DEPTH: usize = 4;

/// The receiving end of a streamed extraction: the result document's bytes, in order, in chunks
/// of about [`CHUNK_BYTES`]. The document is complete only when the extraction returns `Ok`.
pub type Chunks = mpsc::Receiver<Vec<u8>>;

/// What a streamed extraction produced, once every chunk was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extracted {
    pub row_count: u64,
    /// Bytes of the result document.
    pub size_bytes: u64,
    /// What waited its turn on disk.
    pub spilled: SpillStats,
}

/// The finished plaintext of a job's result, collected whole (for tests and benchmarks; the
/// Worker streams it).
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
    /// Where full chunks go (the assembly).
    chunks: mpsc::Sender<Vec<u8>>,
    budget: Arc<Budget>,
    /// Bytes handed on so far.
    sent: u64,
    /// Bytes produced so far (sent or buffered) already charged to the budget.
    charged: u64,
    rows: u64,
    /// A started table whose first row has not come yet: nothing of it is written so far.
    pending_table: Option<String>,
    table_open: bool,
    /// Reports the rows read so far, when someone watches.
    progress: Option<Progress>,
}

/// A connection's finished part of the document: every byte of it was sent.
#[derive(Debug)]
pub struct Part {
    rows: u64,
}

impl ConnectionResult {
    /// `first`: whether this connection sorts first in the document; its buffer then carries
    /// the document's opening `{`. Its bytes go to `chunks`, in order.
    pub fn new(
        name: &str,
        first: bool,
        budget: Arc<Budget>,
        chunks: mpsc::Sender<Vec<u8>>,
    ) -> Result<Self> {
        let mut out = Vec::with_capacity(CHUNK_BYTES + CHUNK_BYTES / 4);
        out.extend_from_slice(if first { b"{\n  " } else { b",\n  " });
        let mut key = JsonWriter::new(&mut out, Style::Indented);
        key.string(name).map_err(json_error)?;
        out.extend_from_slice(b": ");
        let mut writer = JsonWriter::nested(out, Style::Indented, 1);
        writer.begin_object().map_err(json_error)?;
        Ok(ConnectionResult {
            writer,
            chunks,
            budget,
            sent: 0,
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

    /// The keys of a table's row members, `columns`' names, escaped once for every row of it
    /// ([`JsonWriter::encoded_key`]).
    pub fn row_keys(&self, columns: &[crate::catalog::Column]) -> Vec<EncodedKey> {
        columns
            .iter()
            .map(|column| EncodedKey::new(&column.name, Style::Indented, ROW_MEMBER_DEPTH))
            .collect()
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

    /// Closes the row, charges its bytes to the job's budget and, once a chunk is full, hands
    /// it on (waiting while the chunks ahead of it are not taken).
    #[inline]
    pub async fn end_row(&mut self) -> Result<()> {
        if self.close_row()? {
            self.send().await?;
        }
        Ok(())
    }

    /// [`end_row`](Self::end_row) without the wait: closes the row, charges its bytes to the
    /// job's budget, and answers whether a chunk is full, to be handed on by
    /// [`send`](Self::send) before the next rows. For a reader that writes rows in
    /// a loop of its own, with no future kept per row.
    #[inline]
    pub(crate) fn close_row(&mut self) -> Result<bool> {
        self.writer.end_object().map_err(json_error)?;
        self.rows += 1;
        if let Some(progress) = &mut self.progress {
            progress.row(self.rows);
        }
        self.charge()?;
        Ok(self.writer.get_ref().len() >= CHUNK_BYTES)
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
        let produced = self.sent + self.writer.get_ref().len() as u64;
        let delta = produced - self.charged;
        self.charged = produced;
        self.budget.charge(delta)
    }

    /// Hands the buffered bytes on. The receiver gone means the extraction was abandoned.
    pub(crate) async fn send(&mut self) -> Result<()> {
        let fresh = Vec::with_capacity(CHUNK_BYTES + CHUNK_BYTES / 4);
        let chunk = std::mem::replace(self.writer.get_mut(), fresh);
        self.sent += chunk.len() as u64;
        self.chunks
            .send(chunk)
            .await
            .map_err(|_| EngineError::Abandoned)
    }

    /// Drops what a failed attempt wrote, and says whether that was all of it: `true` when
    /// nothing was handed on yet (a connection's bytes stay in its buffer until
    /// [`CHUNK_BYTES`] of them are written, or it finishes), so the attempt left no trace in the
    /// result and its charge goes back to the budget; `false` once a chunk went out, which the
    /// document now holds (or the spool behind it) and cannot take back.
    pub fn discard(self) -> bool {
        if self.sent != 0 {
            return false;
        }
        self.budget.refund(self.charged);
        true
    }

    /// Closes the connection's object and hands on what is left of it.
    pub async fn finish(mut self) -> Result<Part> {
        self.end_table()?;
        self.writer.end_object().map_err(json_error)?;
        self.charge()?;
        if !self.writer.is_complete() {
            return Err(EngineError::Result(
                "a connection's value was not complete".into(),
            ));
        }
        if !self.writer.get_ref().is_empty() {
            self.send().await?;
        }
        Ok(Part { rows: self.rows })
    }
}

impl Part {
    /// The rows it holds.
    pub fn rows(&self) -> u64 {
        self.rows
    }
}

fn json_error(error: JsonError) -> EngineError {
    EngineError::Result(error.to_string())
}

#[cfg(test)]
mod go_reference;
#[cfg(test)]
mod tests;

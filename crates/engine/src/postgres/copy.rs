//! PostgreSQL's binary `COPY ... TO STDOUT` framing: a header, then one tuple per row (a field
//! count, then each field as its length and its bytes in the binary wire form a `DataRow`
//! carries), then a trailer. The server sends a row per `CopyData` message (the header with the
//! first), but the protocol lets messages split rows anywhere, so a tuple cut across chunks is
//! held until its end arrives.
//!
//! <https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.4>

/// The 11 bytes a binary copy starts with.
const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";

/// The header: the signature, a flags word and the length of the header extension.
const HEADER_LEN: usize = 11 + 4 + 4;

/// Bit 16 of the flags: each tuple carries its OID (never, for `COPY (SELECT ...)`).
const FLAG_WITH_OIDS: u32 = 1 << 16;

/// What is wrong with what the server sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum FramingError {
    #[error("the copy does not start with the binary copy signature")]
    Signature,
    #[error("the copy's header sets flags this reader does not know ({0:#x})")]
    Flags(u32),
    #[error("a tuple of {found} fields where {expected} columns were selected")]
    FieldCount { expected: usize, found: i16 },
    #[error("a field of negative length {0}")]
    FieldLength(i32),
    #[error("data after the copy's trailer")]
    AfterTrailer,
    #[error("the copy ended before its trailer")]
    Truncated,
}

/// Reads tuples of `columns` fields from the copy's chunks, in order.
#[derive(Debug)]
pub(crate) struct Tuples {
    columns: usize,
    /// The bytes of an unfinished header or tuple, when a chunk ended inside one.
    held: Vec<u8>,
    /// Bytes of the header extension still to skip (after the header's fixed part).
    extension: usize,
    header_read: bool,
    ended: bool,
    /// Each field of the current tuple: its offset and length in the buffer read, `None` for
    /// a NULL. Reused for every tuple.
    fields: Vec<Option<(usize, usize)>>,
}

/// A buffer being read: a whole chunk, or the held bytes with a chunk appended.
pub(crate) struct Chunk<'a, B> {
    tuples: &'a mut Tuples,
    buf: Buf<B>,
    at: usize,
}

enum Buf<B> {
    Chunk(B),
    Held(Vec<u8>),
}

impl<B: AsRef<[u8]>> Buf<B> {
    fn bytes(&self) -> &[u8] {
        match self {
            Buf::Chunk(bytes) => bytes.as_ref(),
            Buf::Held(held) => held,
        }
    }
}

impl Tuples {
    pub(crate) fn new(columns: usize) -> Tuples {
        Tuples {
            columns,
            held: Vec::new(),
            extension: 0,
            header_read: false,
            ended: false,
            fields: Vec::with_capacity(columns),
        }
    }

    /// Takes the next chunk: read its tuples with [`Chunk::next_tuple`] until it answers
    /// `None`.
    pub(crate) fn chunk<B: AsRef<[u8]>>(&mut self, chunk: B) -> Chunk<'_, B> {
        let buf = if self.held.is_empty() {
            Buf::Chunk(chunk)
        } else {
            let mut held = std::mem::take(&mut self.held);
            held.extend_from_slice(chunk.as_ref());
            Buf::Held(held)
        };
        Chunk {
            tuples: self,
            buf,
            at: 0,
        }
    }

    /// The copy ended: its trailer must have been read, and nothing left over.
    pub(crate) fn finish(&self) -> Result<(), FramingError> {
        if self.ended && self.held.is_empty() {
            Ok(())
        } else {
            Err(FramingError::Truncated)
        }
    }
}

impl<B: AsRef<[u8]>> Chunk<'_, B> {
    /// The next whole tuple in this chunk, its fields as [`Tuple::field`] answers them, or
    /// `None` once the chunk holds no more (a partial tuple is held for the next chunk).
    #[inline]
    pub(crate) fn next_tuple(&mut self) -> Result<Option<Tuple<'_>>, FramingError> {
        let Chunk { tuples, buf, at } = self;
        let bytes = buf.bytes();
        // Keeps what is left of the chunk for the next one.
        let hold = |tuples: &mut Tuples, at: &mut usize| {
            tuples.held.clear();
            tuples.held.extend_from_slice(&bytes[*at..]);
            *at = bytes.len();
            Ok(None)
        };
        if !tuples.header_read {
            match read_header(&bytes[*at..])? {
                Some(extension) => {
                    *at += HEADER_LEN;
                    tuples.extension = extension;
                    tuples.header_read = true;
                }
                None => return hold(tuples, at),
            }
        }
        if tuples.extension > 0 {
            let skipped = tuples.extension.min(bytes.len() - *at);
            *at += skipped;
            tuples.extension -= skipped;
            if tuples.extension > 0 {
                return Ok(None);
            }
        }
        let rest = &bytes[*at..];
        if rest.is_empty() {
            return Ok(None);
        }
        if tuples.ended {
            return Err(FramingError::AfterTrailer);
        }
        let Some(count) = rest.get(..2) else {
            return hold(tuples, at);
        };
        let count = i16::from_be_bytes([count[0], count[1]]);
        if count == -1 {
            tuples.ended = true;
            *at += 2;
            if *at < bytes.len() {
                return Err(FramingError::AfterTrailer);
            }
            return Ok(None);
        }
        if usize::try_from(count).ok() != Some(tuples.columns) {
            return Err(FramingError::FieldCount {
                expected: tuples.columns,
                found: count,
            });
        }
        tuples.fields.clear();
        let mut pos = *at + 2;
        for _ in 0..tuples.columns {
            let Some(len) = bytes.get(pos..pos + 4) else {
                return hold(tuples, at);
            };
            let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
            pos += 4;
            if len == -1 {
                tuples.fields.push(None);
                continue;
            }
            let len = usize::try_from(len).map_err(|_| FramingError::FieldLength(len))?;
            if bytes.len() - pos < len {
                return hold(tuples, at);
            }
            tuples.fields.push(Some((pos, len)));
            pos += len;
        }
        *at = pos;
        Ok(Some(Tuple {
            bytes,
            fields: &tuples.fields,
        }))
    }
}

/// The header's extension length, or `None` when `bytes` does not hold the whole header yet.
fn read_header(bytes: &[u8]) -> Result<Option<usize>, FramingError> {
    let Some(header) = bytes.get(..HEADER_LEN) else {
        if !SIGNATURE.starts_with(&bytes[..bytes.len().min(SIGNATURE.len())]) {
            return Err(FramingError::Signature);
        }
        return Ok(None);
    };
    if &header[..11] != SIGNATURE {
        return Err(FramingError::Signature);
    }
    let flags = u32::from_be_bytes([header[11], header[12], header[13], header[14]]);
    // Bits 0-15 are reserved for format-breaking changes, 16 is the OIDs; 17-31 may be
    // ignored.
    if flags & (FLAG_WITH_OIDS | 0xffff) != 0 {
        return Err(FramingError::Flags(flags));
    }
    let extension = u32::from_be_bytes([header[15], header[16], header[17], header[18]]);
    Ok(Some(usize::try_from(extension).unwrap_or(usize::MAX)))
}

/// One tuple's fields.
pub(crate) struct Tuple<'a> {
    bytes: &'a [u8],
    fields: &'a [Option<(usize, usize)>],
}

impl<'a> Tuple<'a> {
    /// Field `i`'s bytes, `None` for a NULL (`i` is below the column count).
    #[inline]
    pub(crate) fn field(&self, i: usize) -> Option<&'a [u8]> {
        self.fields[i].map(|(at, len)| &self.bytes[at..at + len])
    }
}

#[cfg(test)]
mod tests;

//! `PartBuffer`: the part an upload is filling, lent out so that a producer appends to it in
//! place instead of handing over a copy.

/// The part an [`Upload`](crate::Upload) is filling, lent by
/// [`Upload::lend`](crate::Upload::lend) so that a producer (the Worker's seal, on a blocking
/// thread) appends its output straight into it, instead of into a buffer of its own that
/// [`Upload::write`](crate::Upload::write) would then copy; taken back by
/// [`Upload::give_back`](crate::Upload::give_back).
///
/// Append only: the bytes it held when lent are already the body's. Append at most
/// [`room`](Self::room) bytes: what goes past the part's end is moved to the next part, which is
/// correct but costs the copy lending avoids.
#[derive(Debug)]
pub struct PartBuffer {
    bytes: Vec<u8>,
    /// Its length when lent: what follows was appended by the borrower.
    start: usize,
    /// The length at which the part is full.
    end: usize,
}

impl PartBuffer {
    pub(crate) fn lent(bytes: Vec<u8>, end: usize) -> PartBuffer {
        PartBuffer {
            start: bytes.len(),
            bytes,
            end,
        }
    }

    /// A buffer of no upload, without a limit: what a store that only copies bytes in
    /// ([`write`](crate::Upload::write)) lends.
    pub fn unbounded() -> PartBuffer {
        PartBuffer::lent(Vec::new(), usize::MAX)
    }

    /// How many more bytes the part takes.
    pub fn room(&self) -> usize {
        self.end.saturating_sub(self.bytes.len())
    }

    /// The buffer to append to (append only; see the type's documentation).
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// The bytes appended since it was lent.
    pub fn appended(&self) -> &[u8] {
        &self.bytes[self.start.min(self.bytes.len())..]
    }

    pub(crate) fn into_parts(self) -> (Vec<u8>, usize) {
        (self.bytes, self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_and_appended_count_from_the_lend() {
        let mut part = PartBuffer::lent(b"abcd".to_vec(), 10);
        assert_eq!(part.room(), 6);
        assert!(part.appended().is_empty());
        part.buffer().extend_from_slice(b"efghijkl");
        assert_eq!(part.room(), 0);
        assert_eq!(part.appended(), b"efghijkl");
        assert_eq!(part.into_parts(), (b"abcdefghijkl".to_vec(), 4));
    }

    #[test]
    fn an_unbounded_buffer_has_room_for_anything() {
        let mut part = PartBuffer::unbounded();
        part.buffer().extend_from_slice(&[1; 100]);
        assert_eq!(part.room(), usize::MAX - 100);
        assert_eq!(part.appended(), &[1; 100][..]);
    }
}

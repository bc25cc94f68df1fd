//! The CRC32 (ISO-HDLC, S3's `CRC32`) a stored body carries in `x-amz-checksum-crc32`, taken as
//! the body's bytes arrive (while they are still in the CPU's cache): every request the store
//! sends, a part or a single PutObject, carries the value its [`Upload`](crate::Upload) took,
//! rather than one computed by reading the body again.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

/// The CRC32 of the bytes given so far.
pub(crate) struct Crc32(crc_fast::Digest);

impl Default for Crc32 {
    fn default() -> Self {
        Crc32(crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32IsoHdlc))
    }
}

impl Crc32 {
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// The checksum: a 32-bit CRC, which the digest keeps in a wider integer.
    pub(crate) fn value(&self) -> u32 {
        self.0.finalize() as u32
    }
}

/// The `x-amz-checksum-crc32` value: the big-endian CRC32, in base64.
pub(crate) fn header(crc32: u32) -> String {
    STANDARD.encode(crc32.to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(bytes: &[u8]) -> u32 {
        let mut crc = Crc32::default();
        crc.update(bytes);
        crc.value()
    }

    #[test]
    fn the_checksum_is_the_big_endian_crc32_in_base64() {
        // CRC32 ("hello") = 0x3610a686.
        assert_eq!(header(of(b"hello")), "NhCmhg==");
        assert_eq!(header(of(b"")), "AAAAAA==");
    }

    #[test]
    fn pieces_give_the_crc32_of_the_whole() {
        let whole: Vec<u8> = (0..10_000u32).map(|i| (i * 31) as u8).collect();
        let mut crc = Crc32::default();
        for piece in whole.chunks(777) {
            crc.update(piece);
        }
        assert_eq!(crc.value(), crc32fast::hash(&whole));
    }
}

//! The 32-byte secret buffer behind every derived key: wiped on drop, never printed.

use std::fmt;

use zeroize::{Zeroize, ZeroizeOnDrop};

/// Length in bytes of every derived key.
pub(crate) const KEY_LEN: usize = 32;

/// Raw key bytes. Deliberately has no `Display`, no `Serialize`, and a `Debug` that prints nothing
/// of the bytes; the memory is zeroed when the value (or any clone of it) is dropped.
#[derive(Clone, Zeroize, ZeroizeOnDrop)]
pub(crate) struct Secret32([u8; KEY_LEN]);

impl Secret32 {
    pub(crate) fn new(bytes: [u8; KEY_LEN]) -> Self {
        Self(bytes)
    }

    /// The raw bytes, for handing to a cipher or MAC constructor.
    pub(crate) fn expose(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl fmt::Debug for Secret32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_prints_no_byte_of_the_secret() {
        let secret = Secret32::new([0xab; KEY_LEN]);
        let printed = format!("{secret:?}");
        assert_eq!(printed, "<redacted>");
    }

    #[test]
    fn zeroize_wipes_the_bytes() {
        let mut secret = Secret32::new([0x5a; KEY_LEN]);
        secret.zeroize();
        assert_eq!(secret.expose(), &[0u8; KEY_LEN]);
    }
}

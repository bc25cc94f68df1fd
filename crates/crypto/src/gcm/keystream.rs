//! GCM's counter-mode keystream for [`Gcm`](super::Gcm): the VAES version where the CPU has it,
//! the `ctr` crate's (AES-NI or portable, as the `aes` crate picks) everywhere else.
//!
//! The choice is made once per seal, at construction; both produce the same bytes (the `vaes`
//! module's tests compare them for random keys, counters, lengths and splits, and `gcm`'s tests
//! compare the whole cipher with `aes-gcm`).

use aes::cipher::{KeyIvInit as _, StreamCipher as _};
use aes::Aes256;

#[cfg(target_arch = "x86_64")]
use super::vaes::VaesCtr;
use crate::secret::KEY_LEN;

const BLOCK: usize = 16;

type Ctr = ctr::Ctr32BE<Aes256>;

/// An AES-256 keystream in GCM's counter mode (`inc32`), applied by XOR.
pub(crate) enum Keystream {
    #[cfg(target_arch = "x86_64")]
    Vaes(Box<VaesCtr>),
    Portable(Box<Ctr>),
}

impl Keystream {
    /// The fastest keystream this CPU runs, from counter block `start`.
    pub(crate) fn new(key: &[u8; KEY_LEN], start: &[u8; BLOCK]) -> Self {
        #[cfg(target_arch = "x86_64")]
        if let Some(vaes) = VaesCtr::new(key, start) {
            return Self::Vaes(Box::new(vaes));
        }
        Self::portable(key, start)
    }

    /// The `ctr` crate's keystream, whatever the CPU: the reference the fast one is tested and
    /// measured against.
    pub(crate) fn portable(key: &[u8; KEY_LEN], start: &[u8; BLOCK]) -> Self {
        Self::Portable(Box::new(Ctr::new(key.into(), start.into())))
    }

    /// XORs the next `data.len()` bytes of keystream into `data`.
    pub(crate) fn apply_keystream(&mut self, data: &mut [u8]) {
        match self {
            #[cfg(target_arch = "x86_64")]
            Self::Vaes(vaes) => vaes.apply_keystream(data),
            Self::Portable(ctr) => ctr.apply_keystream(data),
        }
    }
}

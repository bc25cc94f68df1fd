//! Claims of lib-streaming's outbox that a relay of this process could not give back, held in
//! memory until MongoDB answers again.
//!
//! A relay settles the rows it holds (`PROCESSING` under its claim token) one by one, and gives
//! back as `PENDING` (`outbox_claim::release`) a row it cannot settle. When MongoDB refuses
//! that too, the claim is held here and given back first thing at the repairer's next pass;
//! lib-commons leaves such rows to its 10-minute takeover. [`HeldClaims`] is shared by every
//! clone of a `ManagerStore`, so what the relay right after a commit holds, the repairer of the
//! same process gives back.

use std::sync::{Arc, Mutex};

use chrono::Utc;

use crate::outbox_claim::release;
use crate::{Result, Store};

/// A claim whose rows may still be `PROCESSING` under `token`: a pass's claim, or the
/// publisher's own token on the rows a terminal record wrote already claimed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenClaim {
    pub tenant: String,
    pub token: String,
}

/// The claims not yet given back (see the module's docs). Cheap to clone: the clones share them.
#[derive(Debug, Clone, Default)]
pub struct HeldClaims(Arc<Mutex<Vec<OpenClaim>>>);

impl HeldClaims {
    /// Holds `claims` (each once) for the next [`HeldClaims::give_back`].
    pub fn hold(&self, claims: impl IntoIterator<Item = OpenClaim>) {
        let mut held = self.lock();
        for claim in claims {
            if !held.contains(&claim) {
                held.push(claim);
            }
        }
    }

    /// How many claims are held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Gives back every held claim: its rows still `PROCESSING` under its token become
    /// `PENDING` (a row another relay took over carries that relay's token, and is left alone).
    /// The number of rows given back; at the first failure that claim and the rest stay held.
    pub async fn give_back(&self, store: &Store) -> Result<u64> {
        let mut given = 0;
        let mut claims = std::mem::take(&mut *self.lock()).into_iter();
        while let Some(claim) = claims.next() {
            match release(store, &claim.tenant, &claim.token, None, Utc::now()).await {
                Ok(rows) => given += rows,
                Err(error) => {
                    self.hold(std::iter::once(claim).chain(claims));
                    return Err(error);
                }
            }
        }
        Ok(given)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<OpenClaim>> {
        // A panic while holding the lock cannot leave the list half-written: pushes and takes
        // are whole.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(token: &str) -> OpenClaim {
        OpenClaim {
            tenant: String::new(),
            token: token.to_owned(),
        }
    }

    #[test]
    fn a_claim_is_held_once_and_clones_share_what_is_held() {
        let held = HeldClaims::default();
        let shared = held.clone();
        held.hold([claim("a"), claim("a"), claim("b")]);
        shared.hold([claim("b")]);
        assert_eq!(shared.len(), 2);
        assert!(!held.is_empty());
    }
}

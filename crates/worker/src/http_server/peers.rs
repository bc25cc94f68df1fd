//! Open connections counted by peer, so that one address cannot hold a server's whole budget.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};

/// The open connections of each peer, at most `limit` each.
pub(super) struct Peers {
    open: Mutex<HashMap<IpAddr, usize>>,
    limit: usize,
}

/// One open connection of a peer; dropping it gives the place back.
pub(super) struct PeerSlot {
    peers: Arc<Peers>,
    key: IpAddr,
}

impl Peers {
    pub(super) fn new(limit: usize) -> Arc<Peers> {
        Arc::new(Peers {
            open: Mutex::new(HashMap::new()),
            limit,
        })
    }

    /// A place for one more connection from `ip`, or `None` when its peer holds `limit` already.
    pub(super) fn enter(self: &Arc<Self>, ip: IpAddr) -> Option<PeerSlot> {
        let key = peer(ip);
        let mut open = self.lock();
        let count = open.entry(key).or_insert(0);
        if *count >= self.limit {
            return None;
        }
        *count += 1;
        Some(PeerSlot {
            peers: self.clone(),
            key,
        })
    }

    /// How many connections `ip`'s peer holds.
    #[cfg(test)]
    fn holding(&self, ip: IpAddr) -> usize {
        self.lock().get(&peer(ip)).copied().unwrap_or(0)
    }

    /// Peers with a connection open.
    #[cfg(test)]
    fn peers(&self) -> usize {
        self.lock().len()
    }

    // The map is only counted in, never left half-updated, so a panic elsewhere while it was
    // held leaves it usable.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.peers.lock();
        if let Some(count) = open.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

/// Who a connection counts against: its IPv4 address (also when it arrives IPv4-mapped on a
/// dual-stack `::` listener), or the /64 of its IPv6 address, the block one host is usually
/// given, so that a host cannot walk its own block for fresh budgets.
fn peer(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn a_peer_gets_at_most_the_limit_and_others_are_not_affected() {
        let peers = Peers::new(3);
        let held: Vec<_> = (0..3)
            .map(|_| peers.enter(ip("10.0.0.1")).expect("under the limit"))
            .collect();
        assert!(peers.enter(ip("10.0.0.1")).is_none(), "over the limit");
        assert!(peers.enter(ip("10.0.0.2")).is_some(), "another address");
        assert_eq!(peers.holding(ip("10.0.0.1")), 3);
        drop(held);
    }

    #[test]
    fn a_closed_connection_gives_its_place_back_and_idle_peers_are_forgotten() {
        let peers = Peers::new(2);
        let first = peers.enter(ip("10.0.0.1")).expect("first");
        let second = peers.enter(ip("10.0.0.1")).expect("second");
        assert!(peers.enter(ip("10.0.0.1")).is_none());
        drop(first);
        let third = peers.enter(ip("10.0.0.1")).expect("the freed place");
        drop(second);
        drop(third);
        assert_eq!(peers.holding(ip("10.0.0.1")), 0);
        assert_eq!(
            peers.peers(),
            0,
            "no entry is kept for a peer with nothing open"
        );
    }

    #[test]
    fn an_ipv4_mapped_address_counts_as_its_ipv4_address() {
        let peers = Peers::new(1);
        let _held = peers.enter(ip("192.0.2.7")).expect("first");
        assert!(peers.enter(ip("::ffff:192.0.2.7")).is_none());
    }

    #[test]
    fn an_ipv6_host_counts_once_for_its_whole_64() {
        let peers = Peers::new(2);
        let _a = peers.enter(ip("2001:db8:1:2::1")).expect("first");
        let _b = peers
            .enter(ip("2001:db8:1:2:ffff:ffff:ffff:ffff"))
            .expect("second");
        assert!(
            peers.enter(ip("2001:db8:1:2:abcd::9")).is_none(),
            "same /64"
        );
        assert!(peers.enter(ip("2001:db8:1:3::1")).is_some(), "the next /64");
    }
}

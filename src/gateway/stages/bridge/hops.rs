//! Whom a hop speaks for. A translated request re-enters the pipeline over loopback, so the
//! pipeline sees the gateway's own address where a limit keyed on `client_ip` must see the
//! 2025-era client's. Before it connects, the hop binds its socket and registers its local
//! address here with the client's address; the pipeline asks [`Hops::client_of`] with the
//! peer address it sees. Only the gateway's own sockets are registered and no other socket can
//! hold the same local address while the hop is open, so nothing a client sends can claim an
//! address (no header to forge or to strip). The entry goes when the hop ends ([`Hop`]'s drop).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The open hops of this process, by their local address: whom each speaks for, under the
/// number of its registration.
#[derive(Debug, Default)]
pub(crate) struct Hops {
    open: Mutex<HashMap<SocketAddr, (IpAddr, u64)>>,
    /// How many are open: a request that is no hop reads this, never the lock.
    count: AtomicUsize,
    /// The number of the last registration.
    last: AtomicU64,
}

impl Hops {
    /// Register the hop whose socket is bound to `local`, speaking for `client`. A kept
    /// connection is registered again for each request it carries; the newest registration
    /// holds, and only its own [`Hop`] ends it.
    pub(crate) fn open(self: &Arc<Self>, local: SocketAddr, client: IpAddr) -> Hop {
        let number = self.last.fetch_add(1, Ordering::Relaxed) + 1;
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.insert(local, (client, number)).is_none() {
            self.count.fetch_add(1, Ordering::Release);
        }
        Hop {
            hops: self.clone(),
            local,
            number,
        }
    }

    /// The client a connection from `peer` speaks for, when it is one of this gateway's hops.
    pub(crate) fn client_of(&self, peer: SocketAddr) -> Option<IpAddr> {
        if self.count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.get(&peer).map(|(client, _)| *client)
    }
}

/// An open hop; dropping it ends its registration (not a newer one of the same socket).
#[derive(Debug)]
pub(crate) struct Hop {
    hops: Arc<Hops>,
    local: SocketAddr,
    number: u64,
}

impl Drop for Hop {
    fn drop(&mut self) {
        let mut open = self.hops.open.lock().unwrap_or_else(|e| e.into_inner());
        if open
            .get(&self.local)
            .is_some_and(|(_, n)| *n == self.number)
        {
            open.remove(&self.local);
            self.hops.count.fetch_sub(1, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hop_speaks_for_its_client_only_while_open_and_only_from_its_own_address() {
        let hops = Arc::new(Hops::default());
        let local: SocketAddr = "127.0.0.1:40001".parse().unwrap();
        let client: IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(hops.client_of(local), None);
        let hop = hops.open(local, client);
        assert_eq!(hops.client_of(local), Some(client));
        let other: SocketAddr = "127.0.0.1:40002".parse().unwrap();
        assert_eq!(
            hops.client_of(other),
            None,
            "another port is another socket"
        );
        drop(hop);
        assert_eq!(hops.client_of(local), None);
        assert_eq!(hops.count.load(Ordering::Acquire), 0);
    }

    #[test]
    fn an_older_registration_of_a_kept_socket_never_ends_the_newer_one() {
        let hops = Arc::new(Hops::default());
        let local: SocketAddr = "127.0.0.1:40003".parse().unwrap();
        let (alice, bob): (IpAddr, IpAddr) =
            ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let first = hops.open(local, alice);
        // The connection went back to the pool and carries bob's request now, while alice's
        // leg is still being dropped.
        let second = hops.open(local, bob);
        drop(first);
        assert_eq!(hops.client_of(local), Some(bob));
        drop(second);
        assert_eq!(hops.client_of(local), None);
        assert_eq!(hops.count.load(Ordering::Acquire), 0);
    }
}

//! Whom a hop speaks for. A translated request re-enters the pipeline over loopback, so the
//! pipeline sees the gateway's own address where a limit keyed on `client_ip` must see the
//! 2025-era client's. Before it connects, the hop binds its socket and registers its local
//! address here with the client's address; the pipeline asks [`Hops::client_of`] with the
//! peer address it sees. Only the gateway's own sockets are registered and no other socket can
//! hold the same local address while the hop is open, so nothing a client sends can claim an
//! address (no header to forge or to strip). The entry goes when the hop ends ([`Hop`]'s drop).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The open hops of this process, by their local address.
#[derive(Debug, Default)]
pub(crate) struct Hops {
    open: Mutex<HashMap<SocketAddr, IpAddr>>,
    /// How many are open: a request that is no hop reads this, never the lock.
    count: AtomicUsize,
}

impl Hops {
    /// Register the hop whose socket is bound to `local`, speaking for `client`.
    pub(crate) fn open(self: &Arc<Self>, local: SocketAddr, client: IpAddr) -> Hop {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.insert(local, client).is_none() {
            self.count.fetch_add(1, Ordering::Release);
        }
        Hop {
            hops: self.clone(),
            local,
        }
    }

    /// The client a connection from `peer` speaks for, when it is one of this gateway's hops.
    pub(crate) fn client_of(&self, peer: SocketAddr) -> Option<IpAddr> {
        if self.count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.get(&peer).copied()
    }
}

/// An open hop; dropping it ends the registration.
#[derive(Debug)]
pub(crate) struct Hop {
    hops: Arc<Hops>,
    local: SocketAddr,
}

impl Drop for Hop {
    fn drop(&mut self) {
        let mut open = self.hops.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.remove(&self.local).is_some() {
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
}

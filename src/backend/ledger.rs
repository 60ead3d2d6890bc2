//! The charge ledger: charges per cart and the one-time use of each confirmed state.

use std::collections::HashMap;
use std::sync::Mutex;

use super::state::now_ms;

/// Charges per cart, with the states already redeemed, shared by the instances of a pool.
///
/// This stands in for the payment system's own idempotency store: a fleet of separate
/// processes would share it (a database). Redeemed nonces are remembered until their state
/// expires; after that the state itself is refused, so the record can go.
#[derive(Default)]
pub struct Ledger {
    carts: Mutex<HashMap<String, Cart>>,
}

#[derive(Default)]
struct Cart {
    charges: u64,
    redeemed: HashMap<String, u64>,
}

impl Ledger {
    /// Charge `cart` once for the state with `nonce`. Returns (charged now, total charges).
    pub fn charge(&self, cart: &str, nonce: &str, expires_at_ms: u64) -> (bool, u64) {
        let mut carts = self.carts.lock().unwrap_or_else(|e| e.into_inner());
        let c = carts.entry(cart.to_owned()).or_default();
        if c.redeemed.contains_key(nonce) {
            return (false, c.charges);
        }
        if c.redeemed.len() >= 4096 {
            let now = now_ms();
            c.redeemed.retain(|_, exp| *exp > now);
        }
        c.redeemed.insert(nonce.to_owned(), expires_at_ms);
        c.charges += 1;
        (true, c.charges)
    }

    pub fn count(&self, cart: &str) -> u64 {
        self.carts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(cart)
            .map_or(0, |c| c.charges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_charges_once_per_nonce() {
        let l = Ledger::default();
        assert_eq!(l.charge("c1", "n1", u64::MAX), (true, 1));
        assert_eq!(l.charge("c1", "n1", u64::MAX), (false, 1));
        assert_eq!(l.charge("c1", "n2", u64::MAX), (true, 2));
        assert_eq!(l.count("c1"), 2);
        assert_eq!(l.count("other"), 0);
    }
}

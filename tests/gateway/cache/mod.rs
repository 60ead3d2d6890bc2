//! The edge cache over real sockets: hits, scopes, ttls and stale answers ([`hits`]),
//! invalidation by notifications and reloads ([`invalidation`]), coalescing under load ([`load`]).

mod hits;
mod invalidation;
mod load;

//! TLS and HTTP/2 on the listeners, over real handshakes with certificates made at test time:
//! SNI, mTLS, minimum version, h2 by ALPN and h2c ([`listeners`]); curl, h2load and the official
//! TypeScript SDK as peers ([`peers_tls`]). Certificates on reload and the upgrade handing TLS listeners over are loss measurements:
//! tests/faults (`tls_reload`).

mod listeners;
mod peers_tls;

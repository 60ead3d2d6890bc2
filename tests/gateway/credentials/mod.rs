//! Credentials towards the fleet, over real sockets: static secrets and config errors
//! ([`statics`]); client credentials and token exchange against a real authorization server,
//! node-oidc-provider on loopback (`tests/oidc/`, [`oauth`]); `private_key_jwt` client
//! authentication ([`jwt`]); an MRTR flow through a token-exchange pool ([`mrtr`]).

mod jwt;
mod mrtr;
mod oauth;
mod statics;

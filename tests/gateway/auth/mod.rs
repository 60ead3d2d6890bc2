//! The OAuth 2.1 resource server at the edge, over real sockets with run-time keys: tokens,
//! JWKS and introspection ([`tokens`]), per-caller list filtering ([`lists`]), per-tool rules
//! ([`rules`]), and the cold start's single-flight JWKS fetch ([`cold`]).

mod cold;
mod lists;
mod rules;
mod tokens;

//! Federation's steps in a request's journey, and the fetching behind them (the endpoints, the
//! catalogs and the merged views are [`super::stages`]):
//!
//! - [`route`]: in `request_filter`'s route step, the pool that serves a claimed name;
//! - [`on_checked`], right after the body check: answer ([`answer`]: a merged list,
//!   `server/discover`; `listen`: a merged `subscriptions/listen` stream), refuse a name no
//!   pool serves, route `completion/complete` by its `ref`, or put a prefixed name back;
//! - [`fetch`]: the gateway's own calls to a pool (lists, discovery), with the caller's or the
//!   pool's credentials; [`refresh`]: the catalogs fetched again when their freshness runs out,
//!   on `list_changed`, on reload; [`report`]: the catalog as JSON for the admin listener.

pub(crate) mod answer;
mod checked;
pub(crate) mod fetch;
mod listen;
pub(crate) mod refresh;
pub(crate) mod report;
mod route;

pub(crate) use checked::{needs_body_first, on_checked};
pub(crate) use route::{enter, route};

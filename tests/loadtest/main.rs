//! The load tester against real targets: MRTR flows ([`flows`]), https and h2 targets
//! ([`https`]), fleets of the official TypeScript and Python SDKs ([`sdk_fleets`]), the demo pool
//! ([`pool`]), reports ([`report`]), Tasks ([`tasks`]), and its figures against what the targets
//! counted ([`truth`]). Sharded runs by separate
//! processes, merged, and the Kubernetes Job's arguments ([`shards`]; the Job's environment is
//! given to a child process, never set in this one).

#[path = "../peers/mod.rs"]
mod peers;
#[path = "../support/mod.rs"]
mod support;

mod flows;
mod https;
mod landing;
mod pool;
mod report;
mod sdk_fleets;
mod shards;
mod tasks;
mod truth;

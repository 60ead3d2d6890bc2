//! The pinned definitions' metric: the tools and prompts a pinning pool serves with another
//! definition than the pinned one, by pool and kind.

use prometheus::{IntGaugeVec, Opts, Registry};

/// `mcp_edge_tool_definition_changed{pool,kind}`, registered in `registry`.
pub(crate) fn definition_changed(registry: &Registry) -> prometheus::Result<IntGaugeVec> {
    let changed = IntGaugeVec::new(
        Opts::new(
            "tool_definition_changed",
            "Tools and prompts a pinning pool serves with another definition than the pinned one (held or flagged until approved)",
        ),
        &["pool", "kind"],
    )?;
    registry.register(Box::new(changed.clone()))?;
    Ok(changed)
}

//! The listeners' metric: when each listener's certificate expires (registered by the
//! listeners once they are built, `transport::listeners`).

use prometheus::{GaugeVec, Opts};

/// `mcp_edge_tls_certificate_expiry_timestamp_seconds{listener,certificate}`, not registered.
pub(crate) fn certificate_expiry() -> prometheus::Result<GaugeVec> {
    GaugeVec::new(
        Opts::new(
            "tls_certificate_expiry_timestamp_seconds",
            "When each listener's certificate expires (notAfter, Unix seconds)",
        ),
        &["listener", "certificate"],
    )
}

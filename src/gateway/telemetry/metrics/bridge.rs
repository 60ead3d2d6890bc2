//! The protocol bridge's metrics (2025-era clients served by the gateway): sessions opened,
//! multi round-trip flows run for a legacy client and how they ended, answers that crossed
//! replicas, the calls waiting for their clients now, the standalone streams open, the
//! resource subscriptions of sessions, and the connections its requests went on.

/// The bridge's metrics (registered once, carried over reloads with the registry).
pub struct BridgeMetrics {
    /// Sessions opened (`initialize` answered), by negotiated revision.
    pub sessions: prometheus::IntCounterVec,
    /// Calls of legacy clients that needed input, by how they ended.
    pub flows: prometheus::IntCounterVec,
    /// Client answers by where they went: `local` (this replica held the call) or `forwarded`.
    pub answers: prometheus::IntCounterVec,
    /// Calls waiting for their client's answers on this replica.
    pub waiting: prometheus::IntGauge,
    /// Calls of 2025-era servers paused on this replica (a question out to a 2026 client).
    pub paused: prometheus::IntGauge,
    /// Paused calls by how they ended: resumed, timed_out.
    pub paused_outcomes: prometheus::IntCounterVec,
    /// Sessions opened with 2025-era servers, by result: opened, reopened (the server had
    /// dropped one), failed.
    pub server_sessions: prometheus::IntCounterVec,
    /// Sessions held with 2025-era servers now.
    pub server_sessions_open: prometheus::IntGauge,
    /// Standalone `GET` streams of 2025-era clients open on this replica.
    pub streams: prometheus::IntGauge,
    /// Connections the bridge sent a request on, by leg (`hop`, `server`) and connection
    /// (`new`, `kept`).
    pub connections: prometheus::IntCounterVec,
    /// Messages of 2025-era clients passed through to a pool that serves both eras, by pool and
    /// kind (`initialize`, `request`, `notification`, `answer`, `stream`, `end`, `gone`).
    pub passed: prometheus::IntCounterVec,
    /// 2025-era clients' cancellations by where they ended calls: `local`, `sent` (to the other
    /// replicas of `legacy.replicas`), `unheld` (no call here, none to send it to).
    pub cancels: prometheus::IntCounterVec,
    /// 2025-era clients' `resources/subscribe` and `resources/unsubscribe`, by change
    /// (`subscribe`, `unsubscribe`, `refused`).
    pub subscriptions: prometheus::IntCounterVec,
    /// `connections{leg="hop",connection="inline"}`, looked up once (each bridged call counts it).
    inline_hops: std::sync::OnceLock<prometheus::IntCounter>,
}

impl BridgeMetrics {
    /// Count a leg carried on the client's own session (`leg="hop"`, `connection="inline"`).
    pub(crate) fn inline_hop(&self) {
        self.inline_hops
            .get_or_init(|| self.connections.with_label_values(&["hop", "inline"]))
            .inc();
    }

    pub(crate) fn register(r: &prometheus::Registry) -> prometheus::Result<BridgeMetrics> {
        use prometheus::{IntCounterVec, IntGauge, Opts};
        let counter = |n: &str, h: &str, l: &[&str]| -> prometheus::Result<IntCounterVec> {
            let c = IntCounterVec::new(Opts::new(n, h), l)?;
            r.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let waiting = IntGauge::new(
            "legacy_calls_waiting",
            "Calls of 2025-era clients waiting for the client's answers on this replica.",
        )?;
        r.register(Box::new(waiting.clone()))?;
        let paused = IntGauge::new("legacy_calls_paused", "Calls of 2025-era servers paused on this replica while a 2026 client answers the server's question.")?;
        r.register(Box::new(paused.clone()))?;
        let open = IntGauge::new(
            "legacy_server_sessions",
            "Sessions held with 2025-era servers now (one per instance and caller).",
        )?;
        r.register(Box::new(open.clone()))?;
        let streams = IntGauge::new(
            "legacy_streams_open",
            "Standalone GET streams of 2025-era clients open on this replica (at most legacy.max_streams).",
        )?;
        r.register(Box::new(streams.clone()))?;
        Ok(BridgeMetrics {
            streams,
            sessions: counter("legacy_sessions_total", "Sessions of 2025-era clients opened by the bridge (initialize answered), by negotiated revision.", &["version"])?,
            flows: counter("legacy_flows_total", "Calls of 2025-era clients that needed input (the fleet answered input_required), by outcome: completed, error (ended with an error), timed_out, cancelled, refused (the client answered with an error).", &["outcome"])?,
            answers: counter("legacy_answers_total", "2025-era clients' answers to the questions the bridge asked, by where they went: local (this replica held the call) or forwarded (sent on to the replica that did).", &["path"])?,
            waiting,
            paused,
            paused_outcomes: counter("legacy_paused_calls_total", "Calls of 2025-era servers paused for a client's answer, by how the pause ended: resumed (the retry came) or timed_out (legacy.answer_timeout passed; the server was sent notifications/cancelled).", &["outcome"])?,
            server_sessions_open: open,
            connections: counter("legacy_connections_total", "Connections the bridge sent a request on, by leg (hop: a 2025-era client's translated request into this gateway's own pipeline; server: a request to a 2025-era server) and connection (new, or kept from an earlier request; inside: a call's leg carried inside the process, on no connection).", &["leg", "connection"])?,
            passed: counter("legacy_passed_total", "Messages of 2025-era clients passed through to a pool whose instances serve both eras (legacy_clients: pass), by pool and kind: initialize, request, notification, answer (to the instance's question), stream (the standalone GET), end (DELETE), gone (the session's instance is gone: the client got 404 and opens a new session).", &["pool", "kind"])?,
            cancels: counter("legacy_cancels_total", "2025-era clients' notifications/cancelled by where they ended calls: local (a call waiting on this replica), sent (no call here: sent on to the other replicas of legacy.replicas), unheld (no call here and none to send it to).", &["path"])?,
            subscriptions: counter("legacy_subscriptions_total", "2025-era clients' resources/subscribe and resources/unsubscribe, by change: subscribe, unsubscribe, refused (no URI, too long, too many for the session, or this replica follows the most sessions it may).", &["change"])?,
            inline_hops: std::sync::OnceLock::new(),
            server_sessions: counter("legacy_server_sessions_total", "Sessions the gateway opened with 2025-era servers, by result: opened, reopened (the server had dropped the previous one: the request was sent again once) or failed.", &["result"])?,
        })
    }
}

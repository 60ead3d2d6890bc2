//! Setting pingora's HTTP server options (h2c, keep-alive limits) on the app a listener serves,
//! through the gateway's wrappers (`head_deadline`, `parked`) down to pingora's proxy.

use pingora::apps::HttpServerOptions;

/// Apps whose pingora server options can be set (the proxy).
pub(crate) trait HasServerOptions {
    fn set_server_options(&mut self, o: HttpServerOptions);
}

impl<SV, C: pingora::connectors::http::custom::Connector> HasServerOptions
    for pingora::proxy::HttpProxy<SV, C>
{
    fn set_server_options(&mut self, o: HttpServerOptions) {
        self.server_options = Some(o);
    }
}

impl<A: HasServerOptions> HasServerOptions
    for crate::gateway::transport::head_deadline::HeadDeadlineApp<A>
{
    fn set_server_options(&mut self, o: HttpServerOptions) {
        self.inner_mut().set_server_options(o);
    }
}

//! What the pipeline holds in place of a client session handed over to the parked loop: the
//! request and response heads (for anything that still reads them) and nothing to read or
//! write. The pipeline only finishes it (`finish`, which reuses nothing); a write is refused
//! with an error rather than a panic, should a later pingora version try one.

use async_trait::async_trait;
use bytes::Bytes;
use futures::Stream as FutStream;
use http::HeaderMap;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::protocols::http::custom::server::Session as CustomSession;
use pingora::protocols::http::{HttpTask, ServerSession};
use pingora::protocols::l4::socket::SocketAddr;
use pingora::protocols::Digest;
use pingora::{Error, ErrorType, Result};
use std::time::Duration;

/// A custom session's message reader (none here).
pub(crate) type Reader = Box<dyn FutStream<Item = Result<Bytes>> + Unpin + Send + Sync + 'static>;

/// The `CustomSession` methods of a session that stands for a client without being one (this
/// module's [`Gone`], the bridge's stand-in): its read, write and drain timeouts kept in
/// `self.timeouts` (and not used: the real client's session keeps its own), and nothing of a
/// raw head, a retry buffer or custom messages.
macro_rules! stand_in_session_basics {
    () => {
        fn set_read_timeout(&mut self, t: Option<std::time::Duration>) {
            self.timeouts[0] = t;
        }
        fn get_read_timeout(&self) -> Option<std::time::Duration> {
            self.timeouts[0]
        }
        fn set_write_timeout(&mut self, t: Option<std::time::Duration>) {
            self.timeouts[1] = t;
        }
        fn get_write_timeout(&self) -> Option<std::time::Duration> {
            self.timeouts[1]
        }
        fn set_total_drain_timeout(&mut self, t: Option<std::time::Duration>) {
            self.timeouts[2] = t;
        }
        fn get_total_drain_timeout(&self) -> Option<std::time::Duration> {
            self.timeouts[2]
        }
        fn pseudo_raw_h1_request_header(&self) -> bytes::Bytes {
            bytes::Bytes::new()
        }
        fn enable_retry_buffering(&mut self) {}
        fn retry_buffer_truncated(&self) -> bool {
            false
        }
        fn get_retry_buffer(&self) -> Option<bytes::Bytes> {
            None
        }
        fn take_custom_message_reader(
            &mut self,
        ) -> Option<$crate::gateway::journey::detached::Reader> {
            None
        }
        fn restore_custom_message_reader(
            &mut self,
            _: $crate::gateway::journey::detached::Reader,
        ) -> pingora::Result<()> {
            Ok(())
        }
        fn take_custom_message_writer(
            &mut self,
        ) -> Option<Box<dyn pingora::protocols::http::custom::CustomMessageWrite>> {
            None
        }
        fn restore_custom_message_writer(
            &mut self,
            _: Box<dyn pingora::protocols::http::custom::CustomMessageWrite>,
        ) -> pingora::Result<()> {
            Ok(())
        }
    };
}
pub(crate) use stand_in_session_basics;

pub(crate) struct Gone {
    req: RequestHeader,
    resp: Option<ResponseHeader>,
    client: Option<SocketAddr>,
    server: Option<SocketAddr>,
    /// Read, write and drain timeouts, as the pipeline set them.
    timeouts: [Option<Duration>; 3],
}

impl Gone {
    /// A session that stands for none: what holds a client's place for the instant its session
    /// is swapped (`journey::bridge::stand_in`).
    pub(crate) fn vacant() -> Gone {
        Gone {
            // `GET /` with no header: nothing parsed, nothing allocated.
            req: RequestHeader::from(http::Request::new(()).into_parts().0),
            resp: None,
            client: None,
            server: None,
            timeouts: [None; 3],
        }
    }

    pub(crate) fn new(from: &ServerSession) -> Gone {
        Gone {
            req: from.req_header().clone(),
            resp: from.response_written().cloned(),
            client: from.client_addr().cloned(),
            server: from.server_addr().cloned(),
            timeouts: [None; 3],
        }
    }
}

fn handed_over<T>() -> Result<T> {
    Error::e_explain(
        ErrorType::WriteError,
        "the response went on outside the pipeline",
    )
}

#[async_trait]
impl CustomSession for Gone {
    fn req_header(&self) -> &RequestHeader {
        &self.req
    }
    fn req_header_mut(&mut self) -> &mut RequestHeader {
        &mut self.req
    }
    async fn read_body_bytes(&mut self) -> Result<Option<Bytes>> {
        Ok(None)
    }
    async fn drain_request_body(&mut self) -> Result<()> {
        Ok(())
    }
    async fn write_response_header(&mut self, _: Box<ResponseHeader>, _: bool) -> Result<()> {
        handed_over()
    }
    async fn write_response_header_ref(&mut self, _: &ResponseHeader, _: bool) -> Result<()> {
        handed_over()
    }
    async fn write_body(&mut self, _: Bytes, _: bool) -> Result<()> {
        handed_over()
    }
    async fn write_trailers(&mut self, _: HeaderMap) -> Result<()> {
        handed_over()
    }
    async fn response_duplex_vec(&mut self, _: Vec<HttpTask>) -> Result<bool> {
        handed_over()
    }
    fn request_summary(&self) -> String {
        format!("{} {} (streaming on)", self.req.method, self.req.uri)
    }
    fn response_written(&self) -> Option<&ResponseHeader> {
        self.resp.as_ref()
    }
    async fn shutdown(&mut self, _: u32, _: &str) {}
    fn is_body_done(&mut self) -> bool {
        true
    }
    async fn finish(&mut self) -> Result<()> {
        Ok(())
    }
    fn is_body_empty(&mut self) -> bool {
        true
    }
    async fn read_body_or_idle(&mut self, _: bool) -> Result<Option<Bytes>> {
        Ok(None)
    }
    fn body_bytes_sent(&self) -> usize {
        0
    }
    fn body_bytes_read(&self) -> usize {
        0
    }
    fn digest(&self) -> Option<&Digest> {
        None
    }
    fn digest_mut(&mut self) -> Option<&mut Digest> {
        None
    }
    fn client_addr(&self) -> Option<&SocketAddr> {
        self.client.as_ref()
    }
    fn server_addr(&self) -> Option<&SocketAddr> {
        self.server.as_ref()
    }
    async fn finish_custom(&mut self) -> Result<()> {
        Ok(())
    }
    stand_in_session_basics!();
}

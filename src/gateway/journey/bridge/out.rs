//! The answer to a 2025-era client's request, as it goes: nothing written yet (the answer can
//! still be plain JSON, or a refusal with its status), or an event stream opened by the first
//! message that must reach the client before the end (a leg's progress, a question).

use bytes::Bytes;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::Session;

use crate::gateway::stages::answer::respond;
use crate::mcp::{sse, sse_event};

/// The head of the client's event stream.
pub(super) fn stream_head() -> Result<ResponseHeader> {
    let mut resp = ResponseHeader::build(200, Some(4))?;
    resp.insert_header(http::header::CONTENT_TYPE, sse::CONTENT_TYPE)?;
    resp.insert_header(http::header::CACHE_CONTROL, "no-cache")?;
    resp.insert_header(http::header::TRANSFER_ENCODING, "chunked")?;
    Ok(resp)
}

/// How the answer to the client is going: nothing written yet, or an open event stream.
pub(super) struct Out<'a> {
    pub(super) session: &'a mut Session,
    pub(super) streaming: bool,
}

impl Out<'_> {
    /// Open the event stream (once: later calls do nothing).
    pub(super) async fn open(&mut self) -> Result<()> {
        if self.streaming {
            return Ok(());
        }
        self.session
            .write_response_header(Box::new(stream_head()?), false)
            .await?;
        self.streaming = true;
        Ok(())
    }

    pub(super) async fn event(&mut self, message: &[u8]) -> Result<()> {
        self.open().await?;
        let ev = Bytes::from(sse_event(message));
        self.session.write_response_body(Some(ev), false).await
    }

    /// The final message: an event that ends the stream, or the whole JSON answer.
    pub(super) async fn last(
        &mut self,
        status: u16,
        message: Vec<u8>,
        pass: &[(&'static str, String)],
    ) -> Result<bool> {
        if self.streaming {
            let ev = Bytes::from(sse_event(&message));
            self.session.write_response_body(Some(ev), true).await?;
        } else {
            respond(self.session, status, message, pass).await?;
        }
        Ok(true)
    }
}

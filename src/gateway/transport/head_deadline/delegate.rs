//! The rest of pingora's `IO` contract for [`Watched`]: everything but reading and writing is
//! the wrapped stream's (identity, TLS facts, digests, peeking, shutdown).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, Ssl, UniqueID, UniqueIDType,
    ALPN,
};

use super::Watched;

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("phase", &self.phase)
            .field("io", &self.io)
            .finish()
    }
}

#[async_trait]
impl Shutdown for Watched {
    async fn shutdown(&mut self) {
        self.io.shutdown().await
    }
}

impl UniqueID for Watched {
    fn id(&self) -> UniqueIDType {
        self.io.id()
    }
}

impl Ssl for Watched {
    fn get_ssl(&self) -> Option<&pingora::protocols::tls::TlsRef> {
        self.io.get_ssl()
    }
    fn get_ssl_digest(&self) -> Option<Arc<pingora::protocols::tls::SslDigest>> {
        self.io.get_ssl_digest()
    }
    fn selected_alpn_proto(&self) -> Option<ALPN> {
        self.io.selected_alpn_proto()
    }
}

impl GetTimingDigest for Watched {
    fn get_timing_digest(&self) -> Vec<Option<pingora::protocols::TimingDigest>> {
        self.io.get_timing_digest()
    }
    fn get_read_pending_time(&self) -> Duration {
        self.io.get_read_pending_time()
    }
    fn get_write_pending_time(&self) -> Duration {
        self.io.get_write_pending_time()
    }
}

impl GetProxyDigest for Watched {
    fn get_proxy_digest(&self) -> Option<Arc<pingora::protocols::raw_connect::ProxyDigest>> {
        self.io.get_proxy_digest()
    }
    fn set_proxy_digest(&mut self, digest: pingora::protocols::raw_connect::ProxyDigest) {
        self.io.set_proxy_digest(digest)
    }
}

impl GetSocketDigest for Watched {
    fn get_socket_digest(&self) -> Option<Arc<pingora::protocols::SocketDigest>> {
        self.io.get_socket_digest()
    }
    fn set_socket_digest(&mut self, digest: pingora::protocols::SocketDigest) {
        self.io.set_socket_digest(digest)
    }
}

#[async_trait]
impl Peek for Watched {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        self.peek(buf).await
    }
}

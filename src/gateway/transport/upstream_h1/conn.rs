//! An upstream connection ([`Conn`]) as the pool keeps it, and the one way the leg reads from
//! it ([`read_now`]), which keeps tokio's view of the socket exact so that the pool's liveness
//! check costs no system call.

use bytes::BytesMut;
use pingora::protocols::l4::socket::SocketAddr as PSocketAddr;
use pingora::protocols::UniqueIDType;
use pingora::Result;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use tokio::net::TcpStream;

/// An upstream TCP connection, kept across requests by the pool.
pub(crate) struct Conn {
    pub(super) stream: TcpStream,
    pub(super) peer: PSocketAddr,
    pub(super) local: Option<PSocketAddr>,
    pub(super) fd: UniqueIDType,
    /// The current request was written whole (set by the body writer).
    pub(super) request_done: AtomicBool,
    /// A write of the current request failed: the connection is not reused.
    pub(super) write_failed: AtomicBool,
}

impl Conn {
    pub(crate) fn new(stream: TcpStream, peer: SocketAddr) -> Result<Conn> {
        #[cfg(unix)]
        let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
        #[cfg(not(unix))]
        let fd = 0;
        let local = stream.local_addr().ok().map(PSocketAddr::Inet);
        Ok(Conn {
            stream,
            peer: PSocketAddr::Inet(peer),
            local,
            fd,
            request_done: AtomicBool::new(false),
            write_failed: AtomicBool::new(false),
        })
    }

    #[cfg(test)]
    /// The socket's file descriptor (what pingora logs as the upstream connection's id).
    pub(crate) fn fd(&self) -> UniqueIDType {
        self.fd
    }

    /// Whether an idle connection is still open: nothing to read and no end of stream. No system
    /// call when tokio knows the socket has nothing (its last read drained it, see `read_now`,
    /// and no event came since); a close or stray bytes from the upstream raise an event, and
    /// then this read sees them.
    pub(crate) fn still_open(&self) -> bool {
        let mut one = [0u8; 1];
        matches!(self.stream.try_read(&mut one), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }
}

/// One read of what `stream` holds now. A read that did not fill the buffer's free space
/// emptied the socket, so tokio is told the socket is no longer readable (as a read that would
/// block tells it): the next read, and the pool's liveness check ([`Conn::still_open`]), wait
/// for the next readiness event instead of paying a system call to learn there is nothing (the
/// `EAGAIN` per request in docs/benchmarks-history.md). Sound with edge-triggered readiness:
/// bytes or a close arriving later raise a new event, and tokio ignores the clearing when an
/// event came in since the readiness it cleared was seen.
pub(super) fn read_now(stream: &TcpStream, buf: &mut BytesMut) -> io::Result<usize> {
    let space = buf.capacity() - buf.len();
    let mut got = None;
    let r = stream.try_io(tokio::io::Interest::READABLE, || {
        let n = stream.try_read_buf(buf)?;
        got = Some(n);
        if n > 0 && n < space {
            Err(io::ErrorKind::WouldBlock.into())
        } else {
            Ok(n)
        }
    });
    match got {
        Some(n) => Ok(n),
        None => r,
    }
}

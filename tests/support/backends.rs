//! Separate `mcp-edge backend` processes for the tests that need instances with their own
//! memory (tasks without a shared store live in the process that created them): one process
//! per port, started and waited for, killed when the [`Procs`] holding them is dropped.

use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::eventually;

/// Kills the processes when dropped, so a failing test leaves nothing behind.
pub struct Procs(pub Vec<Child>);
impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One `mcp-edge backend` process on `port` (its default --advertise is 127.0.0.1:port, the
/// name the gateway's pool lists).
pub fn backend(port: u16) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_mcp-edge"))
        .args(["backend", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert!(
        eventually(Duration::from_secs(20), || TcpStream::connect(addr).is_ok()),
        "backend on {port} did not start"
    );
    child
}

//! Processes for the tests that need real ones: `mcp-edge backend` instances on fixed loopback
//! ports, killed and reaped on drop via [`Procs`].

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{eventually, free_port};

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

/// One `mcp-edge backend` process on `127.0.0.1:port` (its default `--advertise`, the name a
/// gateway pool lists), with a shared state key file or without one; returns once it accepts.
pub fn backend(port: u16, key: Option<&Path>) -> Child {
    let key: Vec<&std::ffi::OsStr> = match key {
        Some(k) => vec!["--state-key-file".as_ref(), k.as_os_str()],
        None => vec![],
    };
    backend_with(port, &key)
}

/// [`backend`] with more arguments (e.g. `--delay 30ms`).
pub fn backend_with<S: AsRef<std::ffi::OsStr>>(port: u16, args: &[S]) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcp-edge"));
    cmd.args(["backend", "--listen", &format!("127.0.0.1:{port}")]);
    cmd.args(args);
    let child = cmd
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

/// `n` backend processes on free loopback ports (with the shared state key file or without), and
/// their addresses in the order started, for a gateway pool.
#[allow(dead_code)]
pub fn fleet(n: usize, key: Option<&Path>) -> (Procs, Vec<SocketAddr>) {
    let ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
    let procs = Procs(ports.iter().map(|p| backend(*p, key)).collect());
    let addrs = ports
        .iter()
        .map(|p| SocketAddr::from(([127, 0, 0, 1], *p)))
        .collect();
    (procs, addrs)
}

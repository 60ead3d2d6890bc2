//! A tokio runtime on a thread of its own, for the test servers (recording and scripted
//! upstreams, the TLS terminator, the h2 upstream): [`Background::start`] runs a setup future
//! (bind, spawn the accept loops) on a two-worker runtime and keeps the runtime alive until the
//! [`Background`] is dropped, which stops it and joins the thread. The small one-request
//! servers (JWKS, introspection) use a blocking [`AcceptLoop`] instead.

use std::future::Future;
use std::time::Duration;

pub struct Background {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    pub fn start<F, Fut>(setup: F) -> Background
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                setup().await;
                let _ = rx.await;
            });
            rt.shutdown_timeout(Duration::from_millis(200));
        });
        Background {
            stop: Some(tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A blocking accept loop on 127.0.0.1 on a thread of its own, for the small one-request
/// servers (JWKS, introspection): each accepted connection, blocking with a 5 s read timeout,
/// goes to `serve`. Dropping it stops the loop and joins the thread.
pub struct AcceptLoop {
    pub addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AcceptLoop {
    pub fn start(mut serve: impl FnMut(std::net::TcpStream) + Send + 'static) -> AcceptLoop {
        use std::sync::atomic::{AtomicBool, Ordering};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Ok((stream, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                stream.set_nonblocking(false).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                serve(stream);
            }
        });
        AcceptLoop {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for AcceptLoop {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

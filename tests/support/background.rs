//! A tokio runtime on a thread of its own, for the test servers (recording and scripted
//! upstreams, the TLS terminator, the h2 upstream): [`Background::start`] runs a setup future
//! (bind, spawn the accept loops) on a two-worker runtime and keeps the runtime alive until the
//! [`Background`] is dropped, which stops it and joins the thread.

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

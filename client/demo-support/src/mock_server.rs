//! The HTTP server a demo's mock (the upstream API, the database) answers on: a free loopback
//! port, served until stopped, and aborted when dropped. The mock itself is its router and the
//! state its handlers share.

use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use axum::Router;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long calls in flight may take to finish once the mock is stopped.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// Sleeps until a mock whose allowance is whole again in `full_in` has it whole (waiting
/// 5 s at most, and 50 ms over): each phase meets the mock as after a quiet moment.
pub async fn until_full(full_in: Duration) {
    if !full_in.is_zero() {
        tokio::time::sleep(full_in.min(Duration::from_secs(5)) + Duration::from_millis(50)).await;
    }
}

/// A running server on 127.0.0.1. Dropping it stops it.
pub struct LoopbackServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl LoopbackServer {
    /// Serves `app` on a free port of 127.0.0.1; should the server fail, says so after
    /// `who` ("pix-demo: mock upstream").
    pub async fn start(app: Router, who: &'static str) -> std::io::Result<LoopbackServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let server = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(err) = server.await {
                eprintln!("{who} stopped: {err}");
            }
        });
        Ok(LoopbackServer {
            addr,
            stop: Some(stop),
            task,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops accepting, lets calls in flight finish (bounded), and returns.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(STOP_TIMEOUT, &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

impl Drop for LoopbackServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The mock's shared state. A panic while the lock is held cannot leave it half-written in a
/// way that matters to a demo, so a poisoned lock is used as it is.
pub fn lock<T>(shared: &Mutex<T>) -> MutexGuard<'_, T> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

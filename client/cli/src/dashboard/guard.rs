//! What the dashboard's server refuses: a request whose `Host` is not the address it listens
//! on (a page of another site that a DNS rebinding points at 127.0.0.1 would otherwise read
//! `/status.json`), a client that does not send its request in time (a read timeout on each
//! connection), and more connections at once than [`MAX_CONNECTIONS`].

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

/// Connections held at once; one more is answered 503 and closed.
pub(crate) const MAX_CONNECTIONS: usize = 64;
/// How long a connection may take to send a whole request, from its start or from the last
/// response bytes written (and how long a write may make no progress).
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What a connection over the bound is told before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\
Connection: close\r\nContent-Length: 92\r\n\r\n\
throttle dashboard: too many connections at once (64); close some, or try again in a moment\n";

/// Whether a request with `Host: host` is meant for a dashboard listening on `bound`: the
/// port must be its port (or absent on port 80), the name `localhost` (on a loopback or
/// unspecified address) or the address itself as an IP literal (any IP literal when it
/// listens on every address, `--public`: an IP literal cannot be rebound, a name can).
pub(crate) fn host_allowed(host: &str, bound: SocketAddr) -> bool {
    let (name, port) = match host.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((inside, "")) => (inside, None),
            Some((inside, after)) => match after.strip_prefix(':') {
                Some(port) => (inside, Some(port)),
                None => return false,
            },
            None => return false,
        },
        None => match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        },
    };
    let port_ok = match port {
        Some(port) => port.parse::<u16>() == Ok(bound.port()),
        None => bound.port() == 80,
    };
    if !port_ok {
        return false;
    }
    let ip = bound.ip();
    if name.eq_ignore_ascii_case("localhost") {
        return ip.is_loopback() || ip.is_unspecified();
    }
    match name.parse::<IpAddr>() {
        Ok(named) => named == ip || ip.is_unspecified(),
        Err(_) => false,
    }
}

/// The middleware: a request for another host is refused with 421 and what to open instead.
pub(crate) async fn check_host(
    axum::extract::State(bound): axum::extract::State<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned());
    match host {
        Some(host) if host_allowed(&host, bound) => next.run(request).await,
        host => {
            let said = match host {
                Some(host) => format!("the Host {:?}", crate::text::cell(&host, 100)),
                None => "a request without a Host header".to_owned(),
            };
            (
                StatusCode::MISDIRECTED_REQUEST,
                [(header::CACHE_CONTROL, "no-store")],
                format!(
                    "throttle dashboard: refused {said}: this dashboard answers only requests \
                     for its own address (another name could be a DNS rebinding of another \
                     site); open http://{}/\n",
                    open_at(bound)
                ),
            )
                .into_response()
        }
    }
}

/// The address to open in a browser for a dashboard listening on `bound`.
pub(crate) fn open_at(bound: SocketAddr) -> String {
    if bound.ip().is_unspecified() {
        format!("127.0.0.1:{}", bound.port())
    } else {
        bound.to_string()
    }
}

/// The listener: at most [`MAX_CONNECTIONS`] at once, each with its [`READ_TIMEOUT`].
pub(crate) struct Guarded {
    listener: TcpListener,
    held: Arc<AtomicUsize>,
}

impl Guarded {
    pub(crate) fn new(listener: TcpListener) -> Guarded {
        Guarded {
            listener,
            held: Arc::new(AtomicUsize::new(0)),
        }
    }
}

impl axum::serve::Listener for Guarded {
    type Io = TimedIo;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TimedIo, SocketAddr) {
        loop {
            let (stream, addr) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(_) => {
                    // Out of file descriptors, say: wait a little rather than spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let held = self.held.fetch_add(1, Ordering::AcqRel);
            let slot = Slot(Arc::clone(&self.held));
            if held >= MAX_CONNECTIONS {
                // Told why, without waiting for it to read; then closed (the slot dropped).
                let _ = stream.try_write(BUSY);
                drop(slot);
                continue;
            }
            return (TimedIo::new(stream, slot), addr);
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// One connection counted while it lives.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection that fails with `TimedOut` once it waits for the client past its deadline:
/// [`READ_TIMEOUT`] from its start, renewed only when response bytes are written, so that a
/// client trickling a request (or sending half of one) is closed.
pub(crate) struct TimedIo {
    stream: TcpStream,
    deadline: Pin<Box<Sleep>>,
    _slot: Slot,
}

impl TimedIo {
    fn new(stream: TcpStream, slot: Slot) -> TimedIo {
        TimedIo {
            stream,
            deadline: Box::pin(tokio::time::sleep(READ_TIMEOUT)),
            _slot: slot,
        }
    }

    /// `Pending` until the deadline, then the timeout error.
    fn expired<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client sent no whole request in time",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// A write's poll as the caller sees it: one still pending runs into the deadline, and
    /// bytes written push the deadline back.
    fn written(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match poll {
            Poll::Pending => self.expired(cx),
            Poll::Ready(Ok(written)) => {
                if written > 0 {
                    self.deadline.as_mut().reset(Instant::now() + READ_TIMEOUT);
                }
                Poll::Ready(Ok(written))
            }
            ready => ready,
        }
    }
}

impl AsyncRead for TimedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Pending => this.expired(cx),
            ready => ready,
        }
    }
}

impl AsyncWrite for TimedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.written(cx, poll)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_flush(cx) {
            Poll::Pending => this.expired(cx),
            ready => ready,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.written(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_listen_address_is_a_host() {
        let v4: SocketAddr = "127.0.0.1:9911".parse().unwrap();
        for ok in ["127.0.0.1:9911", "localhost:9911", "LOCALHOST:9911"] {
            assert!(host_allowed(ok, v4), "{ok}");
        }
        for refused in [
            "evil.example:9911",
            "127.0.0.1:9912",
            "127.0.0.1",
            "localhost",
            "[::1]:9911",
            "127.0.0.1.evil.example:9911",
            "127.0.0.1:9911:9911",
            "",
            "localhost:09911x",
        ] {
            assert!(!host_allowed(refused, v4), "{refused}");
        }
        let v6: SocketAddr = "[::1]:9911".parse().unwrap();
        assert!(host_allowed("[::1]:9911", v6));
        assert!(host_allowed("localhost:9911", v6));
        assert!(!host_allowed("127.0.0.1:9911", v6));
        assert!(!host_allowed("[::1]", v6));
        assert!(!host_allowed("[::1]x9911", v6));
        let on_80: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert!(host_allowed("127.0.0.1", on_80));
        assert!(host_allowed("localhost", on_80));
        // --public on every address: any IP literal, never a name but localhost.
        let public: SocketAddr = "0.0.0.0:9911".parse().unwrap();
        assert!(host_allowed("192.0.2.7:9911", public));
        assert!(host_allowed("localhost:9911", public));
        assert!(!host_allowed("dashboard.example:9911", public));
        assert_eq!(open_at(public), "127.0.0.1:9911");
        assert_eq!(open_at(v6), "[::1]:9911");
    }

    #[test]
    fn the_busy_answer_is_whole() {
        let text = std::str::from_utf8(BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.ends_with(&format!("Content-Length: {}", body.len())),
            "{head}"
        );
        assert!(body.contains(&format!("({MAX_CONNECTIONS})")));
    }
}

//! Free loopback ports.

use std::net::TcpListener;

/// A loopback TCP port that was free a moment ago. Another process may take it before the
/// server binds it, so the caller retries with a new one when the bind fails.
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0 to find a free port");
    listener
        .local_addr()
        .expect("local address of a bound listener")
        .port()
}

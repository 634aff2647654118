//! The client's backends (the module's commands, or their Lua twin as a library or a script)
//! on a real server.

use redis_throttle::Backend;
use throttle_testkit::{Flavor, Server};

use crate::wall::NS_PER_MS;

/// How far a server's clock reading can trail the true time, ns: the module on Redis 7.0
/// reads a monotonic clock anchored once to the wall clock, counted as 1 ms; every other
/// reading (the module's cached µs, the script's `TIME`) is in whole µs.
pub fn clock_lag_ns(flavor: Flavor, backend: Backend) -> i128 {
    let module = matches!(backend, Backend::Module | Backend::Auto);
    if module && !flavor.has_cached_micros() {
        NS_PER_MS
    } else {
        1_000
    }
}

/// The backend by its metrics name (`module`, `library`, `script`, `auto`).
#[track_caller]
pub fn backend_named(name: &str) -> Backend {
    [
        Backend::Module,
        Backend::Library,
        Backend::Script,
        Backend::Auto,
    ]
    .into_iter()
    .find(|b| b.name() == name)
    .unwrap_or_else(|| panic!("no backend named {name:?}"))
}

/// One backend a server, so that a test run on every server runs all three: the script on
/// Redis 7.0, the library on Valkey 8.1, the module on the others.
pub fn backend_on(flavor: Flavor) -> Backend {
    match flavor {
        Flavor::Redis70 => Backend::Script,
        Flavor::Valkey81 => Backend::Library,
        _ => Backend::Module,
    }
}

/// The server a backend runs against: the module loaded for `Module` and `Auto`; none for
/// `Library` and `Script`, as on a managed server that refuses `MODULE LOAD`.
pub fn server_for(flavor: Flavor, backend: Backend) -> Server {
    Server::builder(flavor)
        .module(matches!(backend, Backend::Module | Backend::Auto))
        .start()
}

//! Starts and stops real Redis and Valkey servers for redis-throttle's tests.
//!
//! Every server gets its own loopback port (or unix socket) and its own temporary data
//! directory, so tests can run in parallel. Every wait is bounded by a deadline; a server
//! that does not come up makes the test panic with the server's log (or, from
//! [`ServerBuilder::try_start`], is a [`StartError`] that says why).
//!
//! ```no_run
//! use throttle_testkit::{Flavor, Server};
//!
//! let server = Server::start(Flavor::Valkey91);
//! let mut con = server.conn();
//! let pong: String = redis::cmd("PING").query(&mut con).unwrap();
//! assert_eq!(pong, "PONG");
//! ```

// kill(2) on a server's process group (process.rs, child.rs): one of the two crates with unsafe
// code (the workspace denies it), each block with its `// SAFETY:` comment.
#![allow(unsafe_code)]

mod child;
mod faketime;
mod flavor;
mod info;
mod module;
mod one_node_cluster;
mod port;
mod process;
mod replicated_cluster;
mod server;
mod wait;

pub use child::{ChildOutput, ChildTest};
pub use faketime::{libfaketime, FakeClock};
pub use flavor::Flavor;
pub use info::{command_stat, command_stat_text, info_field};
pub use module::{module_path, try_module_path};
pub use one_node_cluster::one_node_cluster;
pub use replicated_cluster::{cluster_nodes, Master, NodeView, ReplicatedCluster, NODE_TIMEOUT_MS};
pub use server::{Server, ServerBuilder, StartError};
pub use wait::poll;

/// One `#[test]` per server for each case `fn case(flavor: Flavor)`, in modules named after
/// the server, so a failure reads `redis_7_0::case`:
///
/// ```ignore
/// fn answers(flavor: throttle_testkit::Flavor) { /* ... */ }
/// throttle_testkit::per_server!(answers);
/// ```
#[macro_export]
macro_rules! per_server {
    ($($case:ident),* $(,)?) => {
        $crate::on_servers!(
            [redis_7_0 Redis70, redis_8_2 Redis82, valkey_8_1 Valkey81, valkey_9_1 Valkey91]
            $($case),*
        );
    };
}

/// [`per_server!`] on some servers: `on_servers!([redis_8_2 Redis82, ...] case, ...)`, each
/// entry the module's name and the [`Flavor`] variant. One call per file: the modules are
/// named after the servers.
#[macro_export]
macro_rules! on_servers {
    ([$(,)?] $($case:ident),* $(,)?) => {};
    ([$module:ident $flavor:ident $(, $rest:ident $rest_flavor:ident)* $(,)?] $($case:ident),* $(,)?) => {
        mod $module {
            $( #[test] fn $case() { super::$case($crate::Flavor::$flavor) } )*
        }
        $crate::on_servers!([$($rest $rest_flavor),*] $($case),*);
    };
}

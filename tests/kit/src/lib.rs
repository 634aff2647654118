//! Starts and stops real Redis and Valkey servers for redis-throttle's tests.
//!
//! Every server gets its own loopback port (or unix socket) and its own temporary data
//! directory, so tests can run in parallel. Every wait is bounded by a deadline; a server
//! that does not come up makes the test panic with the server's log.
//!
//! ```no_run
//! use throttle_testkit::{Flavor, Server};
//!
//! let server = Server::start(Flavor::Valkey91);
//! let mut con = server.conn();
//! let pong: String = redis::cmd("PING").query(&mut con).unwrap();
//! assert_eq!(pong, "PONG");
//! ```

mod faketime;
mod flavor;
mod info;
mod module;
mod port;
mod process;
mod server;
mod wait;

pub use faketime::libfaketime;
pub use flavor::Flavor;
pub use info::{command_stat, info_field};
pub use module::module_path;
pub use server::{Server, ServerBuilder};

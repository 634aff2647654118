//! Helpers for the end-to-end tests in `tests/tests/`, which reach them through their
//! `mod common` (`use common::{per_server, take, ...}`). A library rather than a module in
//! every test binary: compiled once, and no helper is dead code in the binaries that do not
//! use it. The tests themselves live in the file named after what they check.
//!
//! Time: the module reads the server's clock, which moves between calls. Exact values are
//! asserted where the arithmetic makes them independent of the clock (large capacities, slow
//! rates, a MULTI that freezes the cached clock); elsewhere a value is compared with bounds
//! taken from the server's own `TIME` or from how long the client saw the call take, so a
//! tolerance can only make a check stricter than the contract, never looser.

pub mod cluster;
mod command;
mod keyspace;
mod rng;
mod seed;
mod server;
mod time;

pub use command::{
    as_reply, error_text, line, ok, query, raw_cmd, run, send, strings, take, take_cmd, Reply,
};
pub use keyspace::{digest, exists, info, pexpiretime, pttl, state, state_of};
pub use rng::Rng;
pub use seed::{check_seed_scenario, seed_expected, SEED_INTERVAL_NS};
pub use server::{assert_no_crash, conn_as, process_id, unix_socket_server};
pub use time::{assert_server_instant, ceil_ms, server_time_ns, slack_ms, wait_until, NS_PER_MS};

pub use redis::{Connection, Value};
pub use throttle_testkit::{
    command_stat, info_field, on_servers, per_server, poll, Flavor, Server,
};

//! The end-to-end helpers: one library (the crate `throttle-e2e`) for the tests in
//! `tests/tests/` and the client's tests in `client/tests/` (a dev-dependency). Starting
//! and stopping servers, clusters, replicas, fake clocks and child processes is the server
//! kit's job (`throttle-testkit`, re-exported here where the tests need it); everything a test
//! does with a running server is here: building and sending commands (one way: [`line()`]),
//! reading replies and keys, waiting (one way: [`within`], and [`within_async`] in async
//! code), the seeded generator, the grant-window checker, the fake server on paused time, the
//! client's connections, and what the fleet and partitioned-quota workers share. A library
//! rather than a module in every test binary: compiled once, and no helper is dead code in
//! the binaries that do not use it. The tests themselves live in the file named after what
//! they check; a helper that serves one test file stays in that file.
//!
//! Time: the module reads the server's clock, which moves between calls. Exact values are
//! asserted where the arithmetic makes them independent of the clock (large capacities, slow
//! rates, a MULTI that freezes the cached clock); elsewhere a value is compared with bounds
//! taken from the server's own `TIME` or from how long the client saw the call take, so a
//! tolerance can only make a check stricter than the contract, never looser.

pub mod acl;
mod aof;
pub mod at_once;
mod backend;
mod battery;
mod command;
mod connect;
pub mod contract;
mod env;
pub mod errors;
pub mod fake;
pub mod fake_leases;
mod grants;
#[cfg(feature = "http-supplier")]
pub mod http_supplier;
mod keyspace;
mod pair;
pub mod partitioned;
mod reply;
mod report;
mod reserved;
mod rng;
mod runtime;
mod seed;
mod server;
mod stats;
mod subscriber;
mod throttle;
mod time;
mod transaction;
mod wait;
pub mod wall;

pub use aof::{aof_files, aof_server, aof_size, aof_text, assert_aof_holds_effects};
pub use backend::{backend_named, backend_on, clock_lag_ns, server_for};
pub use battery::{
    bad, bad_keys, bad_quotas, bad_wholes, check_battery, set_up_bad_keys, BadCall, NOT_BUCKETS,
    OTHER_TYPES,
};
pub use command::{error_text, line, ok, query, run, send, shown};
pub use connect::{
    cluster, cluster_client, manager, manager_config, manager_with, multiplexed, TIMEOUT,
};
pub use env::{long_mode, worker_env, worker_number};
pub use grants::{check_windows, worst_excess, Sample, Windows};
pub use keyspace::{
    digest, exists, get, info, keyslot, pexpiretime, pttl, pushback_of, state, state_of, stored,
    stored_state, Pushback,
};
pub use pair::{assert_replica_holds, Pair};
pub use reply::{as_reply, int, ints, num, refusal, strings, Reply};
pub use report::Report;
pub use reserved::{assert_granted_after_the_pause, pause_a_reserved_call, PausedCall};
pub use rng::Rng;
pub use runtime::{runtime, serial};
pub use seed::{check_seed_scenario, seed_expected, SEED_INTERVAL_NS};
pub use server::{assert_no_crash, conn_as, process_id, resp3, unix_socket_server};
pub use stats::{calls, command_stat_of, error_replies, repl_offset};
pub use subscriber::{Announced, Subscriber};
pub use throttle::{
    cut, debit, give, mtake, pause, peek, peek_full, run_int, run_ints, sync, take, take_any,
};
pub use time::{assert_server_instant, ceil_ms, server_time_ns, slack_ms, NS_PER_MS};
pub use transaction::{assert_duration, assert_reply, exec};
pub use wait::{within, within_async};

pub use redis::{Connection, Value};
pub use throttle_testkit::{
    command_stat, info_field, on_servers, per_server, poll, Flavor, Server,
};

//! What the partitioned-quota tests share (`partitioned.rs`, `partitioned_fleet.rs`,
//! `partitioned_failover.rs` in client/tests): the worker process (the test binary run
//! again), what it prints, and the checks on what the workers printed.
//!
//! A worker prints, as it goes (so a SIGKILLed worker's lines are kept):
//! - `START <ns>` before its first call,
//! - `GRANT <at> <done> <partition>` per grant: `at` is when the limiter took the tokens
//!   (`Grant::at`), `done` when the call they are for went out ([`PREPARE`] after
//!   `acquire()` returned),
//! - `LEASE <partition> <from> <until>` per confirmed lease or renewal: the partition is
//!   spent in `[from, until)`,
//! - `LEASE_END <partition> <at> <how>` when it stopped spending one early: `released`
//!   (given back: idle, yielded, at the end), `lost` (a renewal found the key gone or
//!   another owner's) or `lapsed` (no renewal confirmed in time; `at` is the lease's end),
//! - `METRICS ...` at a graceful end.
//!
//! Times are ns since the Unix epoch ([`crate::wall`]): one machine, one clock.

mod check;
mod output;
mod worker;

pub use check::{check, Findings, Freeze};
pub use output::{End, Output};
pub use worker::{cluster_connection, finish_workers, worker, worker_env, Spec, PREPARE};

//! The server's slot table of each quota (THROTTLE.SLOTS, or the library's `throttle_slots`):
//! the calls in flight the server holds, whoever took them, beside the sum the processes
//! report (a process that does not report, a Python worker on the same key, is counted here
//! too; a process whose slots were freed by their leases' end is not).

use redis_throttle::throttle_bucket::SlotsArgs;
use redis_throttle::Backend;

use crate::failure::Failure;
use crate::server::Server;
use crate::status::each_row;
use crate::status::table::{Row, Slots};

/// The slot table of every row, pipelined: each, or why not.
pub(crate) async fn slots_all(
    server: &Server,
    backend: Backend,
    rows: &[Row],
) -> Result<Vec<Result<Slots, String>>, Failure> {
    each_row(server, backend, rows, "SLOTS", |quota| SlotsArgs { quota }).await
}

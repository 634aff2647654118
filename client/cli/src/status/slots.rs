//! The server's slot table of each quota (THROTTLE.SLOTS, or the library's `throttle_slots`):
//! the calls in flight the server holds, whoever took them, beside the sum the processes
//! report (a process that does not report, a Python worker on the same key, is counted here
//! too; a process whose slots were freed by their leases' end is not).

use redis_throttle::throttle_bucket::SlotsArgs;
use redis_throttle::Backend;
use serde::Serialize;

use crate::failure::Failure;
use crate::server::Server;
use crate::status::each_row;
use crate::status::table::Row;

/// A bucket's slot table as it stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Slots {
    /// Slots held now (calls in flight, by every process and client on the key).
    pub(crate) held: u64,
    /// Until the first of their leases ends, ms (0: none held).
    pub(crate) first_lease_ms: u64,
}

/// The slot table of every row, pipelined: each, or why not.
pub(crate) async fn slots_all(
    server: &Server,
    backend: Backend,
    rows: &[Row],
) -> Result<Vec<Result<Slots, String>>, Failure> {
    let replies = each_row(server, backend, rows, "SLOTS", |quota| SlotsArgs { quota }).await?;
    Ok(replies
        .into_iter()
        .map(|reply| {
            reply.map(|table| Slots {
                held: table.held,
                first_lease_ms: table.first_lease_ms,
            })
        })
        .collect())
}

/// What IN FLIGHT shows and the dashboard charts: the server's count when its slot table was
/// read and some slot is held or a process reports a cap or a slot; the processes' sum when the
/// table was not read; none when nothing is in flight and no process counts calls in flight.
pub(crate) fn in_flight(row: &Row) -> Option<u64> {
    let reported = row.fleet.as_ref().and_then(|f| f.in_flight);
    match row.slots {
        Some(slots) if slots.held > 0 || reported.is_some() => Some(slots.held),
        Some(_) => None,
        None => reported,
    }
}

/// The IN FLIGHT cell: `held/cap` (the server's count, the cap the processes report), and
/// `(reported n)` when the processes' sum differs from the server's count; `-` when nothing is
/// in flight and no process counts calls in flight.
pub(crate) fn in_flight_cell(row: &Row) -> String {
    let reported = row.fleet.as_ref().and_then(|f| f.in_flight);
    let cap = row.fleet.as_ref().and_then(|f| f.max_in_flight);
    let Some(shown) = in_flight(row) else {
        return "-".to_owned();
    };
    let mut cell = match cap {
        Some(cap) => format!("{shown}/{cap}"),
        None => shown.to_string(),
    };
    if row.slots.is_some() {
        if let Some(reported) = reported.filter(|r| *r != shown) {
            cell.push_str(&format!(" (reported {reported})"));
        }
    }
    cell
}

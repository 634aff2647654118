//! The server's slot table of each quota (THROTTLE.SLOTS, or the library's `throttle_slots`):
//! the calls in flight the server holds, whoever took them, beside the sum the processes
//! report (a process that does not report, a Python worker on the same key, is counted here
//! too; a process whose slots were freed by their leases' end is not).

use redis::{Cmd, Value};
use serde::Serialize;

use crate::failure::{redis_failure, Failure};
use crate::server::{Backend, Server};
use crate::status::table::Row;
use crate::status::BATCH;

/// A bucket's slot table as it stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Slots {
    /// Slots held now (calls in flight, by every process and client on the key).
    pub(crate) held: u64,
    /// Until the first of their leases ends, ms (0: none held).
    pub(crate) first_lease_ms: u64,
}

/// THROTTLE.SLOTS (`FCALL_RO throttle_slots` on the library) of `key` with its quota.
fn command(backend: Backend, key: &str, capacity: u64, rate: &str) -> Cmd {
    let mut cmd = match backend {
        Backend::Module => redis::cmd("THROTTLE.SLOTS"),
        Backend::Library => {
            let mut cmd = redis::cmd("FCALL_RO");
            cmd.arg("throttle_slots").arg(1);
            cmd
        }
    };
    cmd.arg(key).arg(capacity).arg(rate);
    cmd
}

/// The slot table of every row, pipelined: each, or the server's error.
pub(crate) async fn slots_all(
    server: &mut Server,
    backend: Backend,
    rows: &[Row],
) -> Result<Vec<Result<Slots, String>>, Failure> {
    let mut all = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(BATCH) {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for row in chunk {
            pipe.add_command(command(backend, &row.key, row.capacity, &row.rate));
        }
        let replies: Vec<Value> = pipe
            .query_async(&mut server.con)
            .await
            .map_err(|err| redis_failure(&server.url, "SLOTS", &err))?;
        all.extend(replies.into_iter().map(slots_of));
    }
    Ok(all)
}

/// A SLOTS reply `[held, first_lease_ms]`, or what is wrong with it.
pub(crate) fn slots_of(reply: Value) -> Result<Slots, String> {
    let numbers: Vec<i64> = match reply {
        Value::ServerError(err) => return Err(err.to_string()),
        other => redis::from_redis_value(other).map_err(|err| err.to_string())?,
    };
    let number = |i: usize| {
        numbers
            .get(i)
            .and_then(|n| u64::try_from(*n).ok())
            .ok_or_else(|| format!("an unexpected SLOTS reply: {numbers:?}"))
    };
    if numbers.len() != 2 {
        return Err(format!("an unexpected SLOTS reply: {numbers:?}"));
    }
    Ok(Slots {
        held: number(0)?,
        first_lease_ms: number(1)?,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slots_reply_is_read_and_a_bad_one_refused() {
        let reply = Value::Array([3, 2500].map(Value::Int).to_vec());
        assert_eq!(
            slots_of(reply),
            Ok(Slots {
                held: 3,
                first_lease_ms: 2500
            })
        );
        for bad in [vec![1], vec![-1, 0], vec![1, 2, 3]] {
            let reply = Value::Array(bad.into_iter().map(Value::Int).collect());
            assert!(slots_of(reply).is_err());
        }
        assert!(slots_of(Value::Nil).is_err());
        assert!(slots_of(Value::BulkString(b"x".to_vec())).is_err());
    }

    #[test]
    fn slot_commands_go_to_the_module_or_the_library() {
        let module = command(Backend::Module, "k", 10, "0.5");
        assert_eq!(
            String::from_utf8_lossy(&module.get_packed_command()),
            "*4\r\n$14\r\nTHROTTLE.SLOTS\r\n$1\r\nk\r\n$2\r\n10\r\n$3\r\n0.5\r\n"
        );
        let library = command(Backend::Library, "k", 10, "0.5");
        assert!(String::from_utf8_lossy(&library.get_packed_command())
            .starts_with("*6\r\n$8\r\nFCALL_RO\r\n$14\r\nthrottle_slots\r\n$1\r\n1\r\n"));
    }
}

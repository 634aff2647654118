//! Running a call by the module's command, by the function library or by the script, and what
//! every family of checks shares: the clock units, the server's clock, a call's outcome as
//! text.

use redis::{Connection, Value};
use redis_throttle::script::{LIBRARY, SOURCE};
use throttle_e2e::server_time_ns;

pub const S: i128 = 1_000_000_000;
/// The furthest after the clock a stored state is a bucket.
pub const AHEAD: i128 = throttle_bucket::LATEST_STATE_AHEAD_NS as i128;

/// The server's clock (`TIME`), in ns, as wide as the cases' offsets.
pub fn server_now_ns(con: &mut Connection) -> i128 {
    i128::from(server_time_ns(con))
}

/// The server's clock as the commands read it: clamped to the year 2200.
pub fn clamped_now_ns(con: &mut Connection) -> i128 {
    server_now_ns(con).min(i128::from(throttle_bucket::MAX_NOW_NS))
}

/// Loads the library (`FUNCTION LOAD REPLACE`) and the script (`SCRIPT LOAD`): the script's
/// sha.
pub fn load(con: &mut Connection) -> String {
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(LIBRARY)
        .query(con)
        .expect("FUNCTION LOAD");
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SOURCE)
        .query(con)
        .expect("SCRIPT LOAD")
}

/// Who runs a call: the module's command, the library's function, or the script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runner {
    Module,
    Library,
    Script,
}

/// The Lua runners, each held to the module.
pub const LUA: [Runner; 2] = [Runner::Library, Runner::Script];

/// `THROTTLE.<COMMAND> [numkeys] keys args`, `FCALL(_RO) throttle_<command> numkeys keys args`,
/// or `EVALSHA(_RO) sha numkeys keys command args`.
pub fn command<A: redis::ToRedisArgs>(
    runner: Runner,
    sha: &str,
    name: &str,
    keys: &[String],
    args: &[A],
) -> redis::Cmd {
    match runner {
        Runner::Module => {
            let mut cmd = redis::cmd(&format!("THROTTLE.{}", name.to_uppercase()));
            if name == "mtake" {
                cmd.arg(keys.len());
            }
            cmd.arg(keys).arg(args);
            cmd
        }
        Runner::Library => {
            // A peek must never write, so it runs as a read-only function.
            let read_only = name == "peek" || name == "slots";
            let fcall = if read_only { "FCALL_RO" } else { "FCALL" };
            let mut cmd = redis::cmd(fcall);
            cmd.arg(format!("throttle_{name}"))
                .arg(keys.len())
                .arg(keys)
                .arg(args);
            cmd
        }
        Runner::Script => {
            // A peek must never write, so it runs as a read-only script.
            let eval = if name == "peek" || name == "slots" {
                "EVALSHA_RO"
            } else {
                "EVALSHA"
            };
            let mut cmd = redis::cmd(eval);
            cmd.arg(sha).arg(keys.len()).arg(keys).arg(name).arg(args);
            cmd
        }
    }
}

/// The fifth element of a THROTTLE.TAKE ... TICKET reply (the slot follows it with INFLIGHT).
pub fn ticket_of(reply: &Value) -> i64 {
    match reply {
        Value::Array(items) if (5..=8).contains(&items.len()) => match items[4] {
            Value::Int(ticket) => ticket,
            ref other => panic!("a ticket that is not an integer: {other:?}"),
        },
        other => panic!("not a TICKET reply: {other:?}"),
    }
}

/// The last element of a THROTTLE.TAKE ... INFLIGHT reply: the slot's id.
pub fn slot_of(reply: &Value) -> i64 {
    match reply {
        Value::Array(items) if items.len() >= 5 => match items[items.len() - 1] {
            Value::Int(slot) => slot,
            ref other => panic!("a slot that is not an integer: {other:?}"),
        },
        other => panic!("not an INFLIGHT reply: {other:?}"),
    }
}

/// The id in a THROTTLE.TAKE ... LINE reply: the slot's id when granted, the waiter's ticket in
/// line, 0 otherwise; the integer before the place (and before the reason, on a denial).
pub fn line_id_of(reply: &Value) -> i64 {
    match reply {
        Value::Array(items) if items.len() >= 6 => {
            let back = if items[0] == Value::Int(1) { 2 } else { 3 };
            match items[items.len() - back] {
                Value::Int(id) => id,
                ref other => panic!("an id that is not an integer: {other:?}"),
            }
        }
        other => panic!("not a LINE reply: {other:?}"),
    }
}

/// The ticket of key `j` (from 0, in the call's key order) in a THROTTLE.MTAKE ... TICKET
/// reply: `[granted, wait_ms]`, a pair per key, then a ticket per key.
pub fn key_ticket_of(reply: &Value, j: usize) -> i64 {
    match reply {
        Value::Array(items) if items.len() >= 5 && (items.len() - 2) % 3 == 0 => {
            let keys = (items.len() - 2) / 3;
            assert!(j < keys, "no key {j} in the MTAKE reply {reply:?}");
            match items[2 + 2 * keys + j] {
                Value::Int(ticket) => ticket,
                ref other => panic!("a ticket that is not an integer: {other:?}"),
            }
        }
        other => panic!("not an MTAKE ... TICKET reply: {other:?}"),
    }
}

/// The sets of keys every case runs on: the module's, the library's, the script's, and a mixed
/// one where calls go round the three (the module, the library, the script, the module, ...),
/// which must end up exactly where the module alone does.
pub const SIDES: [&str; 4] = ["module", "library", "script", "mixed"];

/// Who runs call number `call` (from 0) of a case on side `side` (an index of [`SIDES`]).
pub fn runner(side: usize, call: usize) -> Runner {
    const ROUND: [Runner; 3] = [Runner::Module, Runner::Library, Runner::Script];
    match side {
        0 => Runner::Module,
        1 => Runner::Library,
        2 => Runner::Script,
        _ => ROUND[call % 3],
    }
}

/// What a call answers, errors included, as comparable text.
pub fn outcome(result: redis::RedisResult<Value>) -> String {
    match result {
        Ok(value) => format!("{value:?}"),
        Err(e) => format!("error {:?} {:?}", e.code(), e.detail()),
    }
}

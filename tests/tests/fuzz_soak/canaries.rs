//! Keys the fuzzer never names, whose DUMP and expiry must never change.

use throttle_e2e::{line, query, Connection, Value};

use super::pool::dump;
use super::report::show;

/// Keys the fuzzer never names. `canary:bucket` is a bucket in debt that nothing refills
/// while the test runs; `canary:number` an integer string (a valid-looking state).
pub const CANARIES: &[&str] = &[
    "canary:string",
    "canary:hash",
    "canary:number",
    "canary:bucket",
];

/// A canary as it was: its DUMP and expiry.
pub struct Canary {
    key: &'static str,
    dump: Vec<u8>,
    expiry: i64,
}

/// Sets the canaries up and reads them.
pub fn make_canaries(con: &mut Connection) -> Vec<Canary> {
    let _: () = query(
        con,
        redis::cmd("SET")
            .arg("canary:string")
            .arg("do not touch")
            .arg("PX")
            .arg(3_600_000),
    );
    let _: i64 = query(
        con,
        redis::cmd("HSET")
            .arg("canary:hash")
            .arg("f")
            .arg("v")
            .arg("g")
            .arg("w"),
    );
    let _: () = query(con, redis::cmd("SET").arg("canary:number").arg(12345));
    // 10 tokens, one per 1000 s, 3 taken and 20 reserved: in debt for hours.
    let _: Value = query(con, &line("THROTTLE.TAKE canary:bucket 10 0.001 TOKENS 10"));
    let _: Value = query(
        con,
        &line("THROTTLE.TAKE canary:bucket 10 0.001 TOKENS 3 MAXWAIT 100000000"),
    );
    snapshot(con)
}

/// Every canary as it is now.
fn snapshot(con: &mut Connection) -> Vec<Canary> {
    CANARIES
        .iter()
        .map(|&key| Canary {
            key,
            dump: dump(con, key.as_bytes()).unwrap_or_else(|| panic!("{key} is gone")),
            expiry: query(con, redis::cmd("PEXPIRETIME").arg(key)),
        })
        .collect()
}

/// Checks every canary is as it was.
#[track_caller]
pub fn check_canaries(con: &mut Connection, canaries: &[Canary], context: &str) {
    for (was, now) in canaries.iter().zip(snapshot(con)) {
        assert!(
            was.dump == now.dump && was.expiry == now.expiry,
            "{context}: the canary {} changed: DUMP {:?} -> {:?}, expiry {} -> {}",
            was.key,
            show(&was.dump),
            show(&now.dump),
            was.expiry,
            now.expiry
        );
    }
}

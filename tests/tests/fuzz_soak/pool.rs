//! The keys the fuzzer names, and what it last put under them: buckets, other types and junk
//! strings, churned now and then and checked unchanged first.

use std::time::{SystemTime, UNIX_EPOCH};

use throttle_bucket::parse_state;
use throttle_e2e::{query, Connection, Rng};

use super::args::junk_number;
use super::report::show;

/// The keys the fuzzer names and changes the type of. Random keys it makes up start with
/// `fz`, so they can never be one of these or a canary.
pub const POOL: &[&[u8]] = &[
    b"fuzz:a",
    b"fuzz:b",
    b"fuzz:c",
    b"fuzz:{slot}d",
    b"fuzz:\xff\x00\xfe",
    b"",
];

/// What the fuzzer last put under a pool key.
#[derive(Clone, Debug)]
pub enum Kind {
    /// Missing, a bucket, or an integer string THROTTLE.TAKE reads as a state.
    Bucket,
    /// Another type: its DUMP right after the fuzzer made it.
    OtherType { what: &'static str, dump: Vec<u8> },
    /// A string that is not a state.
    Junk { dump: Vec<u8> },
}

#[track_caller]
pub fn dump(con: &mut Connection, key: &[u8]) -> Option<Vec<u8>> {
    query(con, redis::cmd("DUMP").arg(key))
}

/// Checks the key still holds what the fuzzer put there (THROTTLE.TAKE refused to touch it),
/// then puts something else there.
pub fn churn(con: &mut Connection, rng: &mut Rng, index: usize, kinds: &mut [Kind], context: &str) {
    let key = POOL[index];
    let held = match &kinds[index] {
        Kind::Bucket => None,
        Kind::OtherType { what, dump } => Some((*what, dump)),
        Kind::Junk { dump } => Some(("junk string", dump)),
    };
    if let Some((what, before)) = held {
        let now = dump(con, key);
        assert_eq!(
            now.as_deref(),
            Some(before.as_slice()),
            "{context}: the {what} under {} changed although every THROTTLE.TAKE on it was \
             refused",
            show(key)
        );
    }
    let _: i64 = query(con, redis::cmd("DEL").arg(key));
    let junk = |rng: &mut Rng| {
        let len = rng.below(20) as usize;
        rng.bytes(len)
    };
    // Half the time back to a bucket (a missing key is a full one), so that the named keys
    // also see reservations and denials.
    let made = match rng.below(14) {
        0 => {
            let _: i64 = query(con, redis::cmd("RPUSH").arg(key).arg(junk(rng)).arg("x"));
            Some("list")
        }
        1 => {
            let _: i64 = query(
                con,
                redis::cmd("HSET").arg(key).arg(junk(rng)).arg(junk(rng)),
            );
            Some("hash")
        }
        2 => {
            let _: i64 = query(con, redis::cmd("SADD").arg(key).arg(junk(rng)));
            Some("set")
        }
        3 => {
            let _: i64 = query(
                con,
                redis::cmd("ZADD")
                    .arg(key)
                    .arg(rng.below(100))
                    .arg(junk(rng)),
            );
            Some("zset")
        }
        4 => {
            let _: String = query(
                con,
                redis::cmd("XADD").arg(key).arg("*").arg("f").arg(junk(rng)),
            );
            Some("stream")
        }
        5 | 6 => {
            // A string: junk, something number-like, or a valid state (in the past, now,
            // in the future, the largest), perhaps with a TTL.
            let now_ns = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .expect("after 1970")
                .as_nanos() as i64;
            let value: Vec<u8> = match rng.below(6) {
                0 => junk(rng),
                1 => junk_number(rng),
                2 => (now_ns + rng.below(3_600_000_000_000) as i64)
                    .to_string()
                    .into_bytes(),
                3 => rng
                    .pick(&["0", "1", "9223372036854775807", "007"])
                    .as_bytes()
                    .to_vec(),
                4 => rng.some_digits(1, 25).into_bytes(),
                _ => (now_ns - rng.below(3_600_000_000_000) as i64)
                    .to_string()
                    .into_bytes(),
            };
            let mut set = redis::cmd("SET");
            set.arg(key).arg(&value);
            let is_state = parse_state(&value, now_ns).is_ok();
            // A TTL only on a state: a junk string that expired would be a bucket.
            if is_state && rng.one_in(3) {
                set.arg("PX").arg(rng.range(1, 10_000));
            }
            let _: () = query(con, &set);
            if is_state {
                None
            } else {
                let dump = dump(con, key).expect("the string just set");
                kinds[index] = Kind::Junk { dump };
                return;
            }
        }
        // Back to a bucket (a missing key is a full one).
        _ => None,
    };
    kinds[index] = match made {
        Some(what) => Kind::OtherType {
            what,
            dump: dump(con, key).expect("the key just made"),
        },
        None => Kind::Bucket,
    };
}

//! Reading keys and the server's INFO without changing anything.

use redis::Connection;

use crate::command::query;

/// The stored state of a bucket: GET read as the module writes it (ns since the epoch, 8
/// bytes little-endian).
#[track_caller]
pub fn state(con: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    let raw: Vec<u8> = query(con, redis::cmd("GET").arg(key));
    state_of(&raw)
}

/// A stored state's bytes as the instant it holds: the 8 bytes the module writes, or the
/// digits of an earlier release (which a refused call leaves as they are); panics on anything
/// else.
#[track_caller]
pub fn state_of(raw: &[u8]) -> i64 {
    if let Ok(bytes) = <[u8; 8]>::try_from(raw) {
        return i64::from_le_bytes(bytes);
    }
    std::str::from_utf8(raw)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| panic!("the state {raw:?} is neither 8 bytes nor digits"))
}

#[track_caller]
pub fn pexpiretime(con: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    query(con, redis::cmd("PEXPIRETIME").arg(key))
}

#[track_caller]
pub fn pttl(con: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    query(con, redis::cmd("PTTL").arg(key))
}

#[track_caller]
pub fn exists(con: &mut Connection, key: impl redis::ToRedisArgs) -> bool {
    query::<i64>(con, redis::cmd("EXISTS").arg(key)) == 1
}

/// `DEBUG DIGEST`: one hash of the whole dataset.
#[track_caller]
pub fn digest(con: &mut Connection) -> String {
    query(con, redis::cmd("DEBUG").arg("DIGEST"))
}

#[track_caller]
pub fn info(con: &mut Connection, section: &str) -> String {
    query(con, redis::cmd("INFO").arg(section))
}

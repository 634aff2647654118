//! Reading keys and the server's INFO without changing anything.

use redis::Connection;

use crate::command::query;

/// The stored state of a bucket: GET read as the module writes it (ns since the epoch, 8
/// bytes little-endian), or the digits of an earlier release (see [`state_of`]).
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

/// The stored state of a bucket the client wrote, `None` while the key does not exist:
/// exactly the 8 bytes of the current format (no digits of an earlier release), or a panic.
#[track_caller]
pub fn stored_state(con: &mut Connection, key: &str) -> Option<i64> {
    let raw: Option<Vec<u8>> = query(con, redis::cmd("GET").arg(key));
    raw.map(|bytes| {
        let state: [u8; 8] = bytes
            .as_slice()
            .try_into()
            .unwrap_or_else(|_| panic!("the state of {key} is not 8 bytes: {bytes:?}"));
        i64::from_le_bytes(state)
    })
}

/// The GET of a key as bytes, `None` if it is missing.
#[track_caller]
pub fn get(con: &mut Connection, key: impl redis::ToRedisArgs) -> Option<Vec<u8>> {
    query(con, redis::cmd("GET").arg(key))
}

/// The GET of a string key as text (a lease's owner, a plain value), `None` if it is missing.
#[track_caller]
pub fn stored(con: &mut Connection, key: &str) -> Option<String> {
    query(con, redis::cmd("GET").arg(key))
}

/// `PEXPIRETIME key`: the key's expiry in ms since the epoch (-1 none, -2 no key).
#[track_caller]
pub fn pexpiretime(con: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    query(con, redis::cmd("PEXPIRETIME").arg(key))
}

/// `PTTL key`: ms until the key expires (-1 none, -2 no key).
#[track_caller]
pub fn pttl(con: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    query(con, redis::cmd("PTTL").arg(key))
}

/// Whether the key exists.
#[track_caller]
pub fn exists(con: &mut Connection, key: impl redis::ToRedisArgs) -> bool {
    query::<i64>(con, redis::cmd("EXISTS").arg(key)) == 1
}

/// `DEBUG DIGEST`: one hash of the whole dataset.
#[track_caller]
pub fn digest(con: &mut Connection) -> String {
    query(con, redis::cmd("DEBUG").arg("DIGEST"))
}

/// One section of `INFO`, as text.
#[track_caller]
pub fn info(con: &mut Connection, section: &str) -> String {
    query(con, redis::cmd("INFO").arg(section))
}

/// `CLUSTER KEYSLOT key`.
#[track_caller]
pub fn keyslot(con: &mut Connection, key: &str) -> u16 {
    query(con, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
}

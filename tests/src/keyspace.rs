//! Reading keys and the server's INFO without changing anything.

use redis::Connection;

use crate::command::query;

/// The stored state of a bucket: GET read as the module writes it (ns since the epoch, 8
/// bytes little-endian, or 32 while paused or cut), or the digits of an earlier release (see
/// [`state_of`]).
#[track_caller]
pub fn state(con: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    let raw: Vec<u8> = query(con, redis::cmd("GET").arg(key));
    state_of(&raw)
}

/// A stored state's bytes as the instant it holds: the 8 bytes the module writes (the first 8
/// of the 32 while paused or cut), or the digits of an earlier release (which a refused call
/// leaves as they are); panics on anything else.
#[track_caller]
pub fn state_of(raw: &[u8]) -> i64 {
    if raw.len() == 8 || raw.len() == 32 {
        return field(raw, 0);
    }
    std::str::from_utf8(raw)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or_else(|| panic!("the state {raw:?} is neither 8 or 32 bytes nor digits"))
}

/// The supplier's pushback in a stored state, read from its bytes as the format says (not
/// with the bucket crate's reader): `None` for an 8-byte state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pushback {
    /// The instant (ns) the pause ends.
    pub paused_until: i64,
    /// The cut: its instant (ns), its factor (basis points) and its recovery (ms).
    pub cut: Option<(i64, u16, u64)>,
}

/// The pushback a 32-byte state holds; `None` for 8 bytes; panics on another length.
#[track_caller]
pub fn pushback_of(raw: &[u8]) -> Option<Pushback> {
    match raw.len() {
        8 => None,
        32 => {
            let packed = field(raw, 24) as u64;
            let cut_at = field(raw, 16);
            Some(Pushback {
                paused_until: field(raw, 8),
                cut: (cut_at != 0 || packed != 0).then_some((
                    cut_at,
                    (packed >> 48) as u16,
                    packed & ((1 << 48) - 1),
                )),
            })
        }
        other => panic!("a state of {other} bytes: {raw:?}"),
    }
}

/// The little-endian i64 at `at` in a state's bytes.
fn field(raw: &[u8], at: usize) -> i64 {
    let bytes: [u8; 8] = raw[at..at + 8].try_into().expect("8 bytes");
    i64::from_le_bytes(bytes)
}

/// The stored state of a bucket the client wrote, `None` while the key does not exist:
/// exactly the 8 or 32 bytes of the current format (no digits of an earlier release), or a
/// panic.
#[track_caller]
pub fn stored_state(con: &mut Connection, key: &str) -> Option<i64> {
    let raw: Option<Vec<u8>> = query(con, redis::cmd("GET").arg(key));
    raw.map(|bytes| {
        assert!(
            bytes.len() == 8 || bytes.len() == 32,
            "the state of {key} is not 8 or 32 bytes: {bytes:?}"
        );
        field(&bytes, 0)
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

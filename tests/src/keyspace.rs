//! Reading keys and the server's INFO without changing anything.

use redis::Connection;

use crate::command::query;

/// The stored state of a bucket: GET parsed as an integer (ns since the epoch).
#[track_caller]
pub fn state(con: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    let raw: Vec<u8> = query(con, redis::cmd("GET").arg(key));
    let text = String::from_utf8(raw).expect("the state is ASCII");
    text.parse()
        .unwrap_or_else(|_| panic!("the state {text:?} is not an integer"))
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

//! The server as a whole: who it is, who is logged in, whether it is still well.

use redis::{Connection, Value};
use throttle_testkit::{info_field, Flavor, Server};

use crate::command::query;
use crate::keyspace::info;

/// A server with the module on a unix socket instead of TCP, for the tests that run their
/// checks once more over one.
pub fn unix_socket_server(flavor: Flavor) -> Server {
    let server = Server::builder(flavor).unix_socket(true).start();
    assert_eq!(server.port(), 0, "a unix-socket server has no TCP port");
    assert!(
        server.url().starts_with("redis+unix://"),
        "{}",
        server.url()
    );
    server
}

/// A connection logged in as `user` (created with `nopass`).
pub fn conn_as(server: &Server, user: &str) -> Connection {
    let mut con = server.conn();
    let _: () = query(&mut con, redis::cmd("AUTH").arg(user).arg("any password"));
    con
}

/// A connection that speaks RESP3 (HELLO 3 answered with a map), for checking that replies
/// are the same as in RESP2.
pub fn resp3(server: &Server) -> Connection {
    let client =
        redis::Client::open(format!("{}?protocol=resp3", server.url())).expect("a RESP3 client");
    let mut con = client.get_connection().expect("a RESP3 connection");
    let hello: Value = query(&mut con, redis::cmd("HELLO").arg(3));
    assert!(matches!(hello, Value::Map(_)), "not RESP3: {hello:?}");
    con
}

/// The server's `process_id` (`INFO server`): another one after a restart.
#[track_caller]
pub fn process_id(con: &mut Connection) -> String {
    info_field(&info(con, "server"), "process_id")
        .expect("INFO server has process_id")
        .to_owned()
}

/// Checks the server is alive and well: the same process as at `pid`, and its log holds no
/// panic, internal error or crash report.
#[track_caller]
pub fn assert_no_crash(server: &Server, pid: &str) {
    let mut con = server.conn();
    let pong: String = query(&mut con, &redis::cmd("PING"));
    assert_eq!(pong, "PONG");
    let now = info(&mut con, "server");
    assert_eq!(
        info_field(&now, "process_id"),
        Some(pid),
        "the server restarted"
    );
    let log = server.log();
    for bad in [
        "panicked",
        "internal error",
        "crashed by signal",
        "BUG REPORT",
        "ASSERTION FAILED",
    ] {
        assert!(
            !log.contains(bad),
            "the server log mentions {bad:?}:\n{log}"
        );
    }
}

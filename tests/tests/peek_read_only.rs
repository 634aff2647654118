//! THROTTLE.PEEK is registered `readonly` (and without `deny-oom`), so it runs wherever a
//! read runs and a write does not, on every server: on a read-only replica, in EVAL_RO and
//! FCALL_RO (a `no-writes` function), during CLIENT PAUSE WRITE and when the server is out of
//! memory. THROTTLE.TAKE is refused in each of these, as any write is. The function library's
//! `throttle_peek` (`no-writes`, called with FCALL_RO) answers in each of them too, and its
//! `throttle_take` is refused as the module's command is.

use std::time::{Duration, Instant};

use throttle_e2e::{ok, per_server, run, send, Flavor, Server, Value};

/// The bucket `k` after one token of 5 was taken at one token per 1000 s: PEEK says 4 left,
/// neither paused nor cut.
#[track_caller]
fn assert_peek(value: &Value, what: &str) {
    let Value::Array(items) = value else {
        panic!("{what}: {value:?}");
    };
    assert_eq!(items.len(), 6, "{what}: {value:?}");
    assert_eq!(
        items[..3],
        [Value::Int(1), Value::Int(4), Value::Int(0)],
        "{what}: {value:?}"
    );
    assert!(
        matches!(items[3], Value::Int(reset) if reset > 0 && reset <= 1_000_000),
        "{what}: {value:?}"
    );
    assert_eq!(
        items[4..],
        [Value::Int(0), Value::Int(10_000)],
        "{what}: {value:?}"
    );
}

const PEEK: &str = "THROTTLE.PEEK k 5 0.001";
const TAKE: &str = "THROTTLE.TAKE k 5 0.001";
const LIBRARY_PEEK: &str = "FCALL_RO throttle_peek 1 k 5 0.001";
const LIBRARY_TAKE: &str = "FCALL throttle_take 1 k 5 0.001";

/// Loads the function library (which the replica then receives).
fn load_library(con: &mut throttle_e2e::Connection) {
    let _ = send(
        con,
        redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(redis_throttle::script::LIBRARY),
    )
    .expect("FUNCTION LOAD");
}

fn on_a_read_only_replica(flavor: Flavor) {
    let primary = Server::start(flavor);
    let replica = Server::builder(flavor).replica_of(&primary).start();
    let mut con = primary.conn();
    load_library(&mut con);
    let _ = ok(&mut con, TAKE);
    replica.wait_replica_synced(&primary);
    let mut con = replica.conn();
    assert_peek(&ok(&mut con, PEEK), "PEEK on a read-only replica");
    assert_peek(
        &ok(&mut con, LIBRARY_PEEK),
        "the library's peek on a read-only replica",
    );
    let error = run(&mut con, TAKE).expect_err("TAKE on a replica");
    assert!(error.starts_with("READONLY "), "{error}");
    let error = run(&mut con, LIBRARY_TAKE).expect_err("the library's take on a replica");
    assert!(error.starts_with("READONLY "), "{error}");
}

fn in_read_only_scripts(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let _ = ok(&mut con, TAKE);

    let script = |command: &str| {
        let mut cmd = redis::cmd("EVAL_RO");
        cmd.arg(format!(
            "return redis.call('{command}', KEYS[1], '5', '0.001')"
        ))
        .arg(1)
        .arg("k");
        cmd
    };
    assert_peek(
        &send(&mut con, &script("THROTTLE.PEEK")).expect("PEEK in EVAL_RO"),
        "EVAL_RO",
    );
    let error = send(&mut con, &script("THROTTLE.TAKE")).expect_err("TAKE in EVAL_RO");
    assert!(error.starts_with("ERR "), "{error}");

    let library = "#!lua name=throttle_ro\n\
        redis.register_function{function_name='peek', flags={'no-writes'}, \
        callback=function(keys, args) return redis.call('THROTTLE.PEEK', keys[1], '5', '0.001') end}\n\
        redis.register_function{function_name='take', flags={'no-writes'}, \
        callback=function(keys, args) return redis.call('THROTTLE.TAKE', keys[1], '5', '0.001') end}";
    let _ = send(&mut con, redis::cmd("FUNCTION").arg("LOAD").arg(library)).expect("FUNCTION LOAD");
    assert_peek(
        &ok(&mut con, "FCALL_RO peek 1 k"),
        "FCALL_RO of a no-writes function",
    );
    let error = run(&mut con, "FCALL_RO take 1 k").expect_err("TAKE in no-writes");
    assert!(error.starts_with("ERR "), "{error}");
}

fn during_client_pause_write(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut admin = server.conn();
    load_library(&mut admin);
    let _ = ok(&mut admin, TAKE);
    assert_eq!(ok(&mut admin, "CLIENT PAUSE 20000 WRITE"), Value::Okay);
    let mut con = server.conn();
    let start = Instant::now();
    let reply = run(&mut con, PEEK);
    let library = run(&mut con, LIBRARY_PEEK);
    let took = start.elapsed();
    let _ = ok(&mut admin, "CLIENT UNPAUSE");
    assert_peek(
        &reply.expect("PEEK during CLIENT PAUSE WRITE"),
        "CLIENT PAUSE WRITE",
    );
    assert_peek(
        &library.expect("the library's peek during CLIENT PAUSE WRITE"),
        "the library during CLIENT PAUSE WRITE",
    );
    // A held call would wait for the 20 s pause (or the client's 5 s timeout).
    assert!(
        took < Duration::from_secs(2),
        "PEEK was held {took:?} by CLIENT PAUSE WRITE"
    );
}

fn out_of_memory(flavor: Flavor) {
    let server = Server::builder(flavor)
        .arg("maxmemory-policy", "noeviction")
        .start();
    let mut con = server.conn();
    load_library(&mut con);
    let _ = ok(&mut con, TAKE);
    // Any use is over one byte: every write that may grow memory is refused with OOM.
    let _ = ok(&mut con, "CONFIG SET maxmemory 1");
    let error = run(&mut con, "SET other 1").expect_err("SET under OOM");
    assert!(error.starts_with("OOM "), "{error}");
    let error = run(&mut con, TAKE).expect_err("TAKE under OOM");
    assert!(error.starts_with("OOM "), "{error}");
    let error = run(&mut con, LIBRARY_TAKE).expect_err("the library's take under OOM");
    assert!(error.starts_with("OOM "), "{error}");
    let reply = run(&mut con, PEEK);
    let library = run(&mut con, LIBRARY_PEEK);
    let _ = ok(&mut con, "CONFIG SET maxmemory 0");
    assert_peek(&reply.expect("PEEK under OOM"), "under OOM");
    assert_peek(
        &library.expect("the library's peek under OOM"),
        "the library under OOM",
    );
}

per_server!(
    on_a_read_only_replica,
    in_read_only_scripts,
    during_client_pause_write,
    out_of_memory
);

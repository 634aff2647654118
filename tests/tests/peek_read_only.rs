//! THROTTLE.PEEK is registered `readonly` (and without `deny-oom`), so it runs wherever a
//! read runs and a write does not, on every server: on a read-only replica, in EVAL_RO and
//! FCALL_RO (a `no-writes` function), during CLIENT PAUSE WRITE and when the server is out of
//! memory. THROTTLE.TAKE is refused in each of these, as any write is.

use std::time::{Duration, Instant};

use throttle_e2e::{ok, per_server, run, send, Flavor, Server, Value};

/// The bucket `k` after one token of 5 was taken at one token per 1000 s: PEEK says 4 left.
#[track_caller]
fn assert_peek(value: &Value, what: &str) {
    let Value::Array(items) = value else {
        panic!("{what}: {value:?}");
    };
    assert_eq!(items.len(), 4, "{what}: {value:?}");
    assert_eq!(
        items[..3],
        [Value::Int(1), Value::Int(4), Value::Int(0)],
        "{what}: {value:?}"
    );
    assert!(
        matches!(items[3], Value::Int(reset) if reset > 0 && reset <= 1_000_000),
        "{what}: {value:?}"
    );
}

const PEEK: &str = "THROTTLE.PEEK k 5 0.001";
const TAKE: &str = "THROTTLE.TAKE k 5 0.001";

fn on_a_read_only_replica(flavor: Flavor) {
    let primary = Server::start(flavor);
    let replica = Server::builder(flavor).replica_of(&primary).start();
    let mut con = primary.conn();
    let _ = ok(&mut con, TAKE);
    replica.wait_replica_synced(&primary);
    let mut con = replica.conn();
    assert_peek(&ok(&mut con, PEEK), "PEEK on a read-only replica");
    let error = run(&mut con, TAKE).expect_err("TAKE on a replica");
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
    let _ = ok(&mut admin, TAKE);
    assert_eq!(ok(&mut admin, "CLIENT PAUSE 20000 WRITE"), Value::Okay);
    let mut con = server.conn();
    let start = Instant::now();
    let reply = run(&mut con, PEEK);
    let took = start.elapsed();
    let _ = ok(&mut admin, "CLIENT UNPAUSE");
    assert_peek(
        &reply.expect("PEEK during CLIENT PAUSE WRITE"),
        "CLIENT PAUSE WRITE",
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
    let _ = ok(&mut con, TAKE);
    // Any use is over one byte: every write that may grow memory is refused with OOM.
    let _ = ok(&mut con, "CONFIG SET maxmemory 1");
    let error = run(&mut con, "SET other 1").expect_err("SET under OOM");
    assert!(error.starts_with("OOM "), "{error}");
    let error = run(&mut con, TAKE).expect_err("TAKE under OOM");
    assert!(error.starts_with("OOM "), "{error}");
    let reply = run(&mut con, PEEK);
    let _ = ok(&mut con, "CONFIG SET maxmemory 0");
    assert_peek(&reply.expect("PEEK under OOM"), "under OOM");
}

per_server!(
    on_a_read_only_replica,
    in_read_only_scripts,
    during_client_pause_write,
    out_of_memory
);

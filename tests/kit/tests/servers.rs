//! The kit against the four real servers. Each test starts its own servers (module off, since
//! the module may not be built), so they run in parallel. A missing binary fails the test
//! with the message that says how to install it.

use std::time::Duration;

use redis::{Commands, Connection};
use throttle_testkit::{libfaketime, module_path, Flavor, Server, StartError};

fn set_get(con: &mut Connection, key: &str, value: &str) {
    let _: () = con.set(key, value).unwrap();
    let got: String = con.get(key).unwrap();
    assert_eq!(got, value);
}

fn is_down(server: &Server) -> bool {
    redis::Client::open(server.url())
        .unwrap()
        .get_connection_with_timeout(Duration::from_millis(500))
        .is_err()
}

fn answers(flavor: Flavor) {
    let server = Server::builder(flavor).module(false).start();
    assert_eq!(server.flavor(), flavor);
    assert_ne!(server.port(), 0);
    assert_eq!(server.url(), format!("redis://127.0.0.1:{}", server.port()));
    let mut con = server.conn();
    let pong: String = redis::cmd("PING").query(&mut con).unwrap();
    assert_eq!(pong, "PONG");
    set_get(&mut con, "k", "v");

    // The config the kit promises.
    let dir: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("dir")
        .query(&mut con)
        .unwrap();
    assert_eq!(
        dir[1],
        server.dir().canonicalize().unwrap().display().to_string()
    );
    let save: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("save")
        .query(&mut con)
        .unwrap();
    assert_eq!(save[1], "");
    let digest: String = redis::cmd("DEBUG").arg("DIGEST").query(&mut con).unwrap();
    assert_eq!(digest.len(), 40);
    assert!(
        server.log().contains("Ready to accept connections"),
        "{}",
        server.log()
    );
}

fn aof_survives_kill_and_stop(flavor: Flavor) {
    let mut server = Server::builder(flavor)
        .module(false)
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start();
    let port = server.port();
    set_get(&mut server.conn(), "before-kill", "1");

    server.kill();
    assert!(is_down(&server));
    server.restart();
    assert_eq!(server.port(), port);
    let mut con = server.conn();
    let got: String = con.get("before-kill").unwrap();
    assert_eq!(got, "1");
    set_get(&mut con, "before-stop", "2");

    server.stop();
    assert!(is_down(&server));
    server.restart();
    let got: Vec<String> = server.conn().mget(&["before-kill", "before-stop"]).unwrap();
    assert_eq!(got, ["1", "2"]);
}

fn rdb_save_points_and_restart_while_running(flavor: Flavor) {
    // `save` takes several words; a restart of a running server stops it first.
    let mut server = Server::builder(flavor)
        .module(false)
        .arg("save", "3600 1 300 100")
        .start();
    let mut con = server.conn();
    let save: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("save")
        .query(&mut con)
        .unwrap();
    assert_eq!(save[1], "3600 1 300 100");
    set_get(&mut con, "k", "v");
    let _: () = redis::cmd("SAVE").query(&mut con).unwrap();
    assert!(server.dir().join("dump.rdb").is_file());
    server.restart();
    let got: String = server.conn().get("k").unwrap();
    assert_eq!(got, "v");
}

fn unix_socket(flavor: Flavor) {
    let mut server = Server::builder(flavor)
        .module(false)
        .unix_socket(true)
        .start();
    assert_eq!(server.port(), 0);
    assert!(
        server.url().starts_with("redis+unix:///"),
        "{}",
        server.url()
    );
    set_get(&mut server.conn(), "k", "v");
    server.kill();
    server.restart();
    let pong: String = redis::cmd("PING").query(&mut server.conn()).unwrap();
    assert_eq!(pong, "PONG");
}

fn replica_syncs(flavor: Flavor) {
    let primary = Server::builder(flavor).module(false).start();
    let replica = Server::builder(flavor)
        .module(false)
        .replica_of(&primary)
        .start();
    let mut con = primary.conn();
    for i in 0..100 {
        let _: () = con.set(format!("key:{i}"), i).unwrap();
    }
    replica.wait_replica_synced(&primary);
    let got: i64 = replica.conn().get("key:99").unwrap();
    assert_eq!(got, 99);
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut replica.conn()).unwrap();
    assert_eq!(role[0], redis::Value::BulkString(b"slave".to_vec()));
}

/// A server on a clock 1000 days ahead, with libfaketime preloaded.
fn faketime_moves_the_clock(flavor: Flavor) {
    let libfaketime = libfaketime().display().to_string();
    let server = Server::builder(flavor)
        .module(false)
        .env("LD_PRELOAD", &libfaketime)
        .env("FAKETIME", "+1000d")
        .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
        .start();
    let (secs, _micros): (u64, u64) = redis::cmd("TIME").query(&mut server.conn()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let ahead = secs.saturating_sub(now);
    assert!(ahead > 999 * 86_400, "server clock only {ahead} s ahead");
}

/// A wrapper that keeps the server as its child (`sh` runs it and waits): dropping the
/// server kills both.
fn wrapper_is_killed_with_the_server(flavor: Flavor) {
    let server = Server::builder(flavor)
        .module(false)
        .wrapper("sh", &["-c", "\"$0\" \"$@\"; exit $?"])
        .start();
    let pong: String = redis::cmd("PING").query(&mut server.conn()).unwrap();
    assert_eq!(pong, "PONG");
    let url = server.url();
    drop(server);
    let down = redis::Client::open(url)
        .unwrap()
        .get_connection_with_timeout(Duration::from_millis(500));
    assert!(down.is_err(), "the server outlived its wrapper");
}

fn loads_the_module(flavor: Flavor) {
    // Fails with "run `cargo build -p redis-throttle-module` first" until the module is built.
    let path = module_path();
    let server = Server::start(flavor);
    let mut con = server.conn();
    let info: Vec<redis::Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("THROTTLE.TAKE")
        .query(&mut con)
        .unwrap();
    assert_ne!(
        info,
        [redis::Value::Nil],
        "{} did not register THROTTLE.TAKE",
        path.display()
    );
}

throttle_testkit::per_server!(
    answers,
    aof_survives_kill_and_stop,
    rdb_save_points_and_restart_while_running,
    unix_socket,
    replica_syncs,
    loads_the_module,
);

// Debian's Redis 7.0 is not in this list: see `redis_7_0_hangs_under_faketime`.
#[test]
fn faketime_redis_8_2() {
    faketime_moves_the_clock(Flavor::Redis82)
}

#[test]
fn faketime_valkey_8_1() {
    faketime_moves_the_clock(Flavor::Valkey81)
}

#[test]
fn faketime_valkey_9_1() {
    faketime_moves_the_clock(Flavor::Valkey91)
}

#[test]
fn wrapper_is_killed_with_the_server_redis_8_2() {
    wrapper_is_killed_with_the_server(Flavor::Redis82)
}

/// Debian's redis-server links jemalloc dynamically; libfaketime 0.9.10's setup then recurses
/// into clock_gettime and the server hangs before it listens (and ignores SIGTERM). The kit
/// must fail such a start with the reason, within its deadline, and kill the hung process.
#[test]
#[should_panic(expected = "libfaketime: Cannot recover")]
fn redis_7_0_hangs_under_faketime() {
    faketime_moves_the_clock(Flavor::Redis70)
}

#[test]
fn every_flavor_is_installed() {
    let missing: Vec<String> = Flavor::ALL
        .iter()
        .filter_map(|f| f.binary().err())
        .collect();
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// A server that cannot start is an error that says why, with its log, and leaves nothing
/// running: here Redis refuses an unknown config directive.
#[test]
fn try_start_says_why_a_server_did_not_start() {
    let error = Server::builder(Flavor::Redis82)
        .module(false)
        .arg("no-such-directive", "1")
        .try_start()
        .err()
        .expect("a server with an unknown directive does not start");
    let StartError::Launch {
        flavor,
        url,
        reason,
        log,
    } = &error
    else {
        panic!("expected a launch failure, got {error:?}");
    };
    assert_eq!(*flavor, Flavor::Redis82);
    assert!(reason.contains("exited while starting"), "{reason}");
    assert!(log.contains("no-such-directive"), "{log}");
    let message = error.to_string();
    assert!(
        message.contains(url.as_str()) && message.contains(log.as_str()),
        "{message}"
    );
    let down = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection_with_timeout(Duration::from_millis(500));
    assert!(down.is_err(), "something still answers at {url}");
}

//! The whole single-server suite once more, over a unix socket instead of TCP (replication
//! needs a TCP primary and is left out).

mod common;

use common::{
    check_bad_input_battery, check_flags_and_acl, check_in_memory_round_trips, check_rdb_restart,
    check_replies, check_ttl, query, Flavor, Server,
};

/// A named check of one server.
type Check = (&'static str, fn(&mut Server));

#[test]
fn whole_suite_over_unix_socket() {
    let mut server = Server::builder(Flavor::Valkey91).unix_socket(true).start();
    assert_eq!(server.port(), 0);
    assert!(
        server.url().starts_with("redis+unix://"),
        "{}",
        server.url()
    );
    // Each check compares whole-dataset digests, so each starts from an empty dataset: keys
    // an earlier check left with a short TTL would otherwise expire under it.
    let checks: [Check; 7] = [
        ("replies in RESP2", |s| check_replies(s, "resp2", false)),
        ("replies in RESP3", |s| check_replies(s, "resp3", true)),
        ("TTL", |s| check_ttl(s)),
        ("DEBUG RELOAD, DUMP/RESTORE, COPY", |s| {
            check_in_memory_round_trips(s)
        }),
        ("flags and ACL", |s| check_flags_and_acl(s)),
        ("bad input", |s| check_bad_input_battery(s)),
        ("SAVE and restart", check_rdb_restart),
    ];
    for (name, check) in checks {
        let _: () = query(&mut server.conn(), &redis::cmd("FLUSHALL"));
        eprintln!("over a unix socket: {name}");
        check(&mut server);
    }
}

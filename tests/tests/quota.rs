//! THROTTLE.QUOTA on every server: a quota kept at the server reaches replicas and the AOF as
//! the resulting state (a plain SET, no TTL), survives a reload, keeps the key from expiring
//! while it is kept, and every malformed call gets its exact error.

use redis::Value;
use throttle_e2e::{
    aof_server, assert_aof_holds_effects, bad, bad_keys, bad_quotas, check_battery, errors, get,
    ints, line, per_server, send, BadCall, Connection, Flavor, Pair, Server,
};

per_server!(
    a_kept_quota_replicates_persists_and_keeps_the_key,
    bad_input_battery
);

const UNKNOWN: &str = "ERR unknown option for THROTTLE.QUOTA: the option is CLEAR, which gives \
                       the key back to its callers' quotas";

fn quota(con: &mut Connection, key: &str, args: &str) -> Vec<i64> {
    ints(&send(con, &line(&format!("THROTTLE.QUOTA {key} {args}"))).unwrap())
}

fn pttl(con: &mut Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(con).unwrap()
}

/// Kept on the primary: the replica holds the same bytes and no TTL (DEBUG DIGEST covers both),
/// with only SETs applied; a take on the kept quota, a reload and a clear follow the same way.
fn a_kept_quota_replicates_persists_and_keeps_the_key(flavor: Flavor) {
    let pair = Pair::start(flavor);
    let mut con = pair.primary.conn();
    assert_eq!(quota(&mut con, "rq", "20 20"), [1, 20, 0]);
    assert_eq!(pttl(&mut con, "rq"), -1, "no TTL while a quota is kept");
    pair.assert_replica_same("after a quota is kept");
    // A take with another quota takes from the kept one; the key stays without a TTL.
    let take = ints(&send(&mut con, &line("THROTTLE.TAKE rq 10 10 TOKENS 10")).unwrap());
    assert_eq!(take[..3], [1, 10, 0], "{take:?}");
    assert_eq!(pttl(&mut con, "rq"), -1);
    pair.assert_replica_same("after a take on the kept quota");
    assert_eq!(get(&mut pair.replica.conn(), "rq"), get(&mut con, "rq"));
    // Kept through a reload (RDB), the bytes unchanged.
    let before = get(&mut con, "rq");
    let reloaded: Value = redis::cmd("DEBUG").arg("RELOAD").query(&mut con).unwrap();
    assert_eq!(reloaded, Value::Okay);
    assert_eq!(get(&mut con, "rq"), before, "the reload kept the quota");
    pair.assert_replicates_nothing("the same quota again", |con| {
        assert_eq!(quota(con, "rq", "20 20")[0], 0);
        assert_eq!(quota(con, "missing", "8 9 CLEAR")[0], 0);
    });
    // Cleared: the callers' quota, and a TTL again (the bucket is in debt).
    assert_eq!(quota(&mut con, "rq", "10 10 CLEAR")[0], 1);
    assert!((1..=1000).contains(&pttl(&mut con, "rq")), "a TTL again");
    pair.assert_replica_same("after the quota is cleared");

    let server = aof_server(flavor);
    let mut con = server.conn();
    assert_eq!(quota(&mut con, "aof:q", "5 5"), [1, 5, 0]);
    assert_aof_holds_effects(server.dir(), "set", "after a quota is kept");
}

/// Every malformed THROTTLE.QUOTA gets its exact error, and nothing changes.
fn bad_input_battery(flavor: Flavor) {
    let server = Server::start(flavor);
    let arity = errors::arity("throttle.quota");
    let mut calls: Vec<BadCall> = vec![
        bad(&[], &*arity),
        bad(&[b"k", b"8"], &*arity),
        bad(&[b"k", b"8", b"9", b"CLEAR", b"CLEAR"], &*arity),
        bad(&[b"k", b"8", b"x", b"CLEAR"], errors::RATE),
        bad(&[b"k", b"8", b"9", b"KEEP"], UNKNOWN),
        bad(&[b"k", b"8", b"9", b""], UNKNOWN),
        // The arguments are checked before the key is read.
        bad(&[b"t:list", b"8", b"9", b"KEEP"], UNKNOWN),
    ];
    calls.extend(bad_quotas(&[]));
    calls.extend(bad_keys(&[b"8", b"9"]));
    let checked = check_battery(&server, "THROTTLE.QUOTA", &calls);
    let mut con = server.conn();
    assert_eq!(quota(&mut con, "after", "8 8"), [1, 8, 0]);
    println!("{flavor}: {checked} malformed THROTTLE.QUOTA calls checked");
}

//! A primary with replicas, on every server: after random traffic the replicas hold exactly the
//! primary's data (equal DEBUG DIGEST), because they receive the resulting state (SET ... PXAT),
//! never THROTTLE.TAKE; a denial or an inspection replicates nothing; and a read-only replica
//! refuses THROTTLE.TAKE.

use throttle_e2e::{
    as_reply, assert_replica_holds, digest, line, per_server, query, repl_offset, send, take,
    Flavor, Rng, Server, Value,
};

const SEED: u64 = 0x7468_726f_7474_6c65;
const KEYS: u64 = 20;
const CALLS: usize = 400;

fn replicas_get_the_state_not_the_command(flavor: Flavor) {
    // No replication PINGs during the test, so the replication offset moves only with writes.
    let primary = Server::builder(flavor)
        .arg("repl-ping-replica-period", "3600")
        .start();
    let replica = Server::builder(flavor).replica_of(&primary).start();
    // A replica without the module: the state it receives needs no module to apply.
    let plain = Server::builder(flavor)
        .module(false)
        .replica_of(&primary)
        .start();
    replica.wait_replica_synced(&primary);
    plain.wait_replica_synced(&primary);
    let mut con = primary.conn();

    // Random traffic. Every quota refills at most one token per 20 s, so no bucket is full
    // (no key expires) while the test runs, and the digests cannot race an expiry.
    let mut rng = Rng(SEED);
    let quotas: Vec<(u64, &str)> = (0..KEYS)
        .map(|_| {
            (
                *rng.pick(&[1, 2, 3, 5, 10, 50]),
                *rng.pick(&["0.001", "0.01", "0.02", "0.05"]),
            )
        })
        .collect();
    let (mut granted, mut denied, mut inspected) = (0, 0, 0);
    for batch in 0..CALLS / 50 {
        let mut pipe = redis::pipe();
        let mut sent = Vec::new();
        for _ in 0..50 {
            let key = rng.below(KEYS);
            let (capacity, rate) = quotas[key as usize];
            let mut args = format!("{capacity} {rate}");
            let tokens = match rng.below(4) {
                0 => None,
                1 => Some(0),
                _ => Some(rng.below(capacity + 1)),
            };
            if let Some(n) = tokens {
                args.push_str(&format!(" TOKENS {n}"));
            }
            match rng.below(5) {
                0 => {}
                1 => args.push_str(" MAXWAIT 0"),
                2 => args.push_str(" MAXWAIT 30000"),
                3 => args.push_str(" MAXWAIT 600000"),
                _ => args.push_str(" MAXWAIT 100000000"),
            }
            pipe.add_command(line(&format!("THROTTLE.TAKE rk:{key} {args}")));
            sent.push((tokens.unwrap_or(1), args));
        }
        let replies: Vec<Value> = pipe
            .query(&mut con)
            .unwrap_or_else(|e| panic!("batch {batch}: {}", throttle_e2e::error_text(&e)));
        for ((tokens, args), value) in sent.iter().zip(&replies) {
            let reply = as_reply(value);
            match (reply[0], *tokens) {
                (1, 0) => inspected += 1,
                (1, _) => granted += 1,
                (0, _) => denied += 1,
                _ => panic!("{args}: {reply:?}"),
            }
        }
    }
    assert!(
        granted > 50 && denied > 50 && inspected > 20,
        "the traffic lacks a mix: {granted} granted, {denied} denied, {inspected} inspected"
    );

    let acked: i64 = query(&mut con, redis::cmd("WAIT").arg(2).arg(5000));
    assert_eq!(acked, 2, "WAIT 2 5000");
    replica.wait_replica_synced(&primary);
    plain.wait_replica_synced(&primary);
    let want = digest(&mut con);
    let keys: i64 = query(&mut con, &redis::cmd("DBSIZE"));
    assert!(keys > 0 && keys <= KEYS as i64, "DBSIZE {keys}");
    for (name, server) in [
        ("the replica", &replica),
        ("the replica without the module", &plain),
    ] {
        assert_replica_holds(&mut server.conn(), &want, name);
    }

    // Denials and inspections replicate nothing: the replication offset does not move.
    assert_eq!(take(&mut con, "rk:denied", "1 0.001")[0], 1);
    let before = repl_offset(&mut con);
    assert_eq!(take(&mut con, "rk:denied", "1 0.001")[0], 0);
    assert_eq!(take(&mut con, "rk:denied", "1 0.001 MAXWAIT 999")[0], 0);
    assert_eq!(take(&mut con, "rk:denied", "1 0.001 TOKENS 0")[0], 1);
    assert_eq!(take(&mut con, "rk:absent", "1 0.001 TOKENS 0")[0], 1);
    assert_eq!(
        repl_offset(&mut con),
        before,
        "a denial or TOKENS 0 was replicated"
    );
    assert_eq!(
        take(&mut con, "rk:denied", "1 0.001 MAXWAIT 100000000")[0],
        1
    );
    assert!(
        repl_offset(&mut con) > before,
        "a reservation was not replicated"
    );
    replica.wait_replica_synced(&primary);
    assert_eq!(digest(&mut replica.conn()), digest(&mut con));

    // A read-only replica refuses the command (it writes).
    let mut rcon = replica.conn();
    for args in ["8 9", "8 9 TOKENS 0"] {
        let error = send(&mut rcon, &line(&format!("THROTTLE.TAKE rk:1 {args}")))
            .expect_err("THROTTLE.TAKE on a read-only replica");
        assert!(error.starts_with("READONLY"), "{args}: {error}");
    }
    assert_eq!(digest(&mut rcon), digest(&mut con));
}

per_server!(replicas_get_the_state_not_the_command);

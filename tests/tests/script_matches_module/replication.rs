//! What the script propagates: its effects, as the module's, never itself; and its peek on a
//! read-only replica and during CLIENT PAUSE WRITE.

use redis::{Connection, Value};
use redis_throttle::script::SOURCE;
use throttle_e2e::repl_offset;
use throttle_testkit::{Flavor, Server};

use super::script::{command, load, outcome, Runner};

/// Replicas and the AOF get the script's effects (`SET key <state> PXAT <ms>`), like the
/// module's, never the script: a denial, an inspection, a peek, a pause that a longer pause
/// covers and a give-back of nothing propagate nothing. The peek runs as EVALSHA_RO on the
/// read-only replica and during CLIENT PAUSE WRITE, and answers what THROTTLE.PEEK does.
///
/// Quotas of a token per 1000 s, so that the moving clock of Redis 7.0 cannot change a reply.
pub fn replicates_effects_not_the_script(flavor: Flavor) {
    let primary = Server::start(flavor);
    let replica = Server::builder(flavor).replica_of(&primary).start();
    let mut con = primary.conn();
    let sha = load(&mut con);
    // The primary pings its replicas every 10 s by default, which moves the offset.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("repl-ping-replica-period")
        .arg("3600")
        .query(&mut con)
        .unwrap();
    replica.wait_replica_synced(&primary);

    let call = |con: &mut Connection, keys: &[&str], name: &str, args: &str| -> Value {
        let keys: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
        let words: Vec<&str> = args.split_whitespace().collect();
        command(Runner::Script, &sha, name, &keys, &words)
            .query(con)
            .unwrap_or_else(|e| panic!("{flavor} {name} {args}: {e}"))
    };
    // A call that must propagate nothing.
    let silent = |con: &mut Connection, keys: &[&str], name: &str, args: &str| -> Value {
        let before = repl_offset(con);
        let reply = call(con, keys, name, args);
        assert_eq!(
            repl_offset(con),
            before,
            "{flavor} {name} {args} propagated something"
        );
        reply
    };
    let ints = |value: Value| -> Vec<i64> { redis::from_redis_value(value).unwrap() };
    let int = |value: Value| -> i64 { redis::from_redis_value(value).unwrap() };

    let first = ints(call(&mut con, &["r"], "take", "2 0.001 TICKET"));
    assert_eq!(first[..2], [1, 1], "{flavor}");
    let reserved = call(&mut con, &["r"], "take", "2 0.001 MAXWAIT 5000000");
    assert_eq!(ints(reserved)[..2], [1, 0], "{flavor}");
    assert_eq!(
        ints(silent(&mut con, &["r"], "take", "2 0.001"))[..2],
        [0, 0]
    );
    assert_eq!(
        ints(silent(&mut con, &["r"], "take", "2 0.001 TOKENS 0"))[..2],
        [1, 0]
    );
    assert_eq!(
        ints(silent(&mut con, &["r"], "peek", "2 0.001"))[..2],
        [1, 0]
    );
    // The bucket is 2000 s in debt: a pause whose first token comes after 1999 s (and the
    // second 1000 s later) keeps the state and only marks the bucket paused, so the reserved
    // call inside it is held back; a pause that this one covers (another replica's 429, a
    // second shorter) changes nothing, and says the next token is 1000 s away.
    let marked = int(call(&mut con, &["r"], "pause", "2 0.001 999000"));
    assert!(
        (999_000..=1_000_000).contains(&marked),
        "{flavor}: {marked}"
    );
    // What is left of the first pause, less the time between the two calls (the machine's),
    // and never less than the covered pause's own ms.
    let covered = int(silent(&mut con, &["r"], "pause", "2 0.001 998000"));
    assert!(
        (998_000..=marked).contains(&covered),
        "{flavor}: {covered}, after {marked}"
    );
    // A forged ticket, and the first take's, whose token is behind the reservation: none
    // comes back.
    assert_eq!(
        silent(&mut con, &["r"], "give", "2 0.001 1 1"),
        Value::Int(0)
    );
    let stale = format!("2 0.001 1 {}", first[4]);
    assert_eq!(silent(&mut con, &["r"], "give", &stale), Value::Int(0));

    let taken = ints(call(&mut con, &["g"], "take", "3 0.001 TOKENS 3 TICKET"));
    let back = format!("3 0.001 2 {}", taken[4]);
    assert_eq!(
        call(&mut con, &["g"], "give", &back),
        Value::Int(2),
        "{flavor}"
    );
    assert_eq!(int(call(&mut con, &["p"], "pause", "3 0.001 5000")), 5000);
    let multi = ints(call(
        &mut con,
        &["{m}a", "{m}b"],
        "mtake",
        "3 0.001 1 5 0.001 2",
    ));
    assert_eq!(multi[..2], [1, 0], "{flavor}");
    let short = ints(silent(
        &mut con,
        &["{m}a", "{m}b"],
        "mtake",
        "3 0.001 3 5 0.001 2",
    ));
    assert_eq!(short[0], 0, "{flavor}");
    replica.wait_replica_synced(&primary);

    let mut replica_con = replica.conn();
    let read = |con: &mut Connection, key: &str| -> (Option<Vec<u8>>, i64) {
        let value: Option<Vec<u8>> = redis::cmd("GET").arg(key).query(con).unwrap();
        let expiry: i64 = redis::cmd("PEXPIRETIME").arg(key).query(con).unwrap();
        (value, expiry)
    };
    for key in ["r", "g", "p", "{m}a", "{m}b"] {
        let on_primary = read(&mut con, key);
        assert!(on_primary.0.is_some(), "{flavor} {key}: {on_primary:?}");
        assert_eq!(
            read(&mut replica_con, key),
            on_primary,
            "{flavor} {key}: replica vs primary"
        );
    }
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut replica_con)
        .unwrap();
    assert!(
        !info.contains("cmdstat_evalsha"),
        "{flavor}: the replica ran the script:\n{info}"
    );
    assert!(
        info.contains("cmdstat_set"),
        "{flavor}: the replica got no SET:\n{info}"
    );

    // The peek on the read-only replica, as EVALSHA_RO, answers what THROTTLE.PEEK does there.
    let _: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SOURCE)
        .query(&mut replica_con)
        .unwrap();
    for key in ["r", "p", "missing"] {
        let keys = [key.to_owned()];
        let (module, script): (Vec<i64>, Vec<i64>) = redis::pipe()
            .atomic()
            .add_command(command(
                Runner::Module,
                &sha,
                "peek",
                &keys,
                &["2", "0.001"],
            ))
            .add_command(command(
                Runner::Script,
                &sha,
                "peek",
                &keys,
                &["2", "0.001"],
            ))
            .query(&mut replica_con)
            .unwrap_or_else(|e| panic!("{flavor} peek {key} on the replica: {e}"));
        assert_same_peek(flavor, &module, &script);
    }
    let write = outcome(
        command(
            Runner::Script,
            &sha,
            "take",
            &["not-there".to_owned()],
            &["2", "0.001"],
        )
        .query(&mut replica_con),
    );
    assert!(
        write.contains("READONLY") || write.contains("read only"),
        "{flavor}: {write}"
    );

    // During CLIENT PAUSE WRITE a peek answers at once; a take would wait for the pause.
    let mut other = primary.conn();
    other
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let _: () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(10_000)
        .arg("WRITE")
        .query(&mut con)
        .unwrap();
    let peeked: Result<Vec<i64>, _> = command(
        Runner::Script,
        &sha,
        "peek",
        &["r".to_owned()],
        &["2", "0.001"],
    )
    .query(&mut other);
    let _: () = redis::cmd("CLIENT").arg("UNPAUSE").query(&mut con).unwrap();
    assert_eq!(
        peeked.map(|p| p[..2].to_vec()).ok(),
        Some(vec![1, 0]),
        "{flavor}: peek during CLIENT PAUSE WRITE"
    );
}

/// On servers with the cached clock the two peeks in one MULTI are equal; on Redis 7.0 each
/// command reads the clock itself (the module's only to the ms), a few µs apart on an idle
/// machine and 2 ms apart measured beside two CPU-burning processes, so the reset, over 1000 s
/// away here, may differ by a few ms: 20 at most.
fn assert_same_peek(flavor: Flavor, module: &[i64], script: &[i64]) {
    if flavor.has_cached_micros() {
        assert_eq!(
            script, module,
            "{flavor}: peek, script (left) vs module (right)"
        );
    } else {
        assert_eq!(
            script[..3],
            module[..3],
            "{flavor}: peek, script (left) vs module (right)"
        );
        assert!(
            (script[3] - module[3]).abs() <= 20,
            "{flavor}: peek {script:?} vs {module:?}"
        );
    }
}

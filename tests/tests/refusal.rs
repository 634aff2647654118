//! Every denied THROTTLE.TAKE and MTAKE says what held it back, its reply's last integer (1
//! the tokens, 2 the floor, 4 every slot held, 8 a pause, summed), on every server, through
//! the module and the function library alike; a granted reply has no such integer.
//! (tests/tests/script_matches_module holds the twin to the module byte for byte.)

use redis_throttle::script::LIBRARY;
use throttle_e2e::{ints, per_server, refusal, send, Flavor, Server, Value};

per_server!(every_denial_says_what_held_it_back);

/// One call, as the module's command or the library's function: `take key args` or `pause
/// key args` or `mtake k1,k2 args`.
fn call(library: bool, words: &str) -> redis::Cmd {
    let mut parts = words.split_whitespace();
    let name = parts.next().expect("a command");
    let keys: Vec<String> = parts
        .next()
        .expect("keys")
        .split(',')
        .map(|k| format!("{}:{k}", if library { "lib" } else { "mod" }))
        .collect();
    let mut cmd = if library {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(format!("throttle_{name}")).arg(keys.len());
        cmd
    } else {
        redis::cmd(&format!("THROTTLE.{}", name.to_uppercase()))
    };
    if name == "mtake" && !library {
        cmd.arg(keys.len());
    }
    cmd.arg(&keys);
    for word in parts {
        cmd.arg(word);
    }
    cmd
}

fn every_denial_says_what_held_it_back(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let loaded = send(
        &mut con,
        redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(LIBRARY),
    );
    assert_eq!(loaded, Ok(Value::BulkString(b"throttle".to_vec())));
    // A token every 1000 s, so that no call's outcome depends on the ms between calls (Redis
    // 7.0's clock moves on between them). (call, reason, the reply's length)
    let calls: &[(&str, i64, usize)] = &[
        ("take a 2 0.001 TOKENS 2", 0, 4),
        ("take a 2 0.001", 1, 5),
        ("take a 2 0.001 TICKET", 1, 6),
        ("take b 10 0.001 TOKENS 3", 0, 4),
        ("take b 10 0.001 TOKENS 3 FLOOR 5", 2, 5),
        ("take b 10 0.001 TOKENS 8 FLOOR 2", 1, 5),
        ("take c 100 0.001 INFLIGHT 1 LEASE 600000", 0, 5),
        ("take c 100 0.001 INFLIGHT 1 LEASE 600000", 4, 6),
        (
            "take c 100 0.001 TOKENS 100 TICKET INFLIGHT 1 LEASE 600000",
            5,
            7,
        ),
        ("pause d 10 0.001 600000", 0, 1),
        ("take d 10 0.001", 9, 5),
        ("take d 10 0.001 FLOOR 1", 9, 5),
        ("take d 10 0.001 MAXWAIT 60000 INFLIGHT 1 LEASE 1000", 9, 6),
        ("mtake e,d 10 0.001 1 10 0.001 1", 9, 7),
        ("mtake a,d 2 0.001 1 10 0.001 0", 1, 7),
        ("mtake b,a 10 0.001 3 2 0.001 0 FLOOR 5 0", 2, 7),
        (
            "mtake c,e 100 0.001 1 10 0.001 1 TICKET INFLIGHT 1 LEASE 600000",
            4,
            10,
        ),
        ("mtake e 10 0.001 1", 0, 4),
    ];
    for library in [false, true] {
        for &(words, reason, len) in calls {
            let what = format!(
                "{flavor}, {}: {words}",
                if library { "library" } else { "module" }
            );
            let reply =
                send(&mut con, &call(library, words)).unwrap_or_else(|e| panic!("{what}: {e:?}"));
            if words.starts_with("pause") {
                assert!(
                    matches!(reply, Value::Int(ms) if ms >= 600_000),
                    "{what}: {reply:?}"
                );
                continue;
            }
            assert_eq!(
                (refusal(&reply), ints(&reply).len()),
                (reason, len),
                "{what}: {reply:?}"
            );
        }
    }
}

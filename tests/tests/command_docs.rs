//! What the servers say about the module's commands, on every server: `COMMAND DOCS` (summary,
//! the arguments rendered back into the documented syntax), `COMMAND INFO` (arity, flags, key
//! specs), `COMMAND GETKEYS` for each command (THROTTLE.MTAKE's keys from numkeys), a call of
//! the wrong arity refused when it is queued in MULTI (EXECABORT), and Redis Cluster's own
//! CROSSSLOT for THROTTLE.MTAKE keys in different slots.

use throttle_bucket::Command;
use throttle_e2e::{ok, per_server, run, strings, Flavor, Server, Value};
use throttle_testkit::one_node_cluster;

#[track_caller]
fn text(value: &Value) -> String {
    match value {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".to_owned(),
        other => panic!("expected a string, got {other:?}"),
    }
}

#[track_caller]
fn list(value: &Value) -> &[Value] {
    match value {
        Value::Array(items) | Value::Set(items) => items,
        other => panic!("expected an array, got {other:?}"),
    }
}

/// `field` of a RESP2 map (an array of alternating names and values).
fn field<'a>(map: &'a Value, name: &str) -> Option<&'a Value> {
    list(map)
        .chunks(2)
        .find(|pair| matches!(&pair[0], Value::BulkString(b) if b == name.as_bytes()))
        .and_then(|pair| pair.get(1))
}

#[track_caller]
fn must<'a>(map: &'a Value, name: &str) -> &'a Value {
    field(map, name).unwrap_or_else(|| panic!("no {name:?} in {map:?}"))
}

/// The syntax an argument list describes, as a manual writes it:
/// `key capacity rate [TOKENS tokens] [TICKET]`, `key [key ...]`.
fn syntax(args: &Value) -> String {
    let one = |arg: &Value| -> String {
        let name = text(must(arg, "name"));
        let kind = text(must(arg, "type"));
        let token = field(arg, "token").map(text);
        let flags = field(arg, "flags").map(strings).unwrap_or_default();
        let body = match (kind.as_str(), token) {
            ("pure-token", Some(token)) => token,
            ("block", Some(token)) => format!("{token} {}", syntax(must(arg, "arguments"))),
            ("block", None) => syntax(must(arg, "arguments")),
            (_, Some(token)) => format!("{token} {name}"),
            (_, None) => name,
        };
        let body = if flags.iter().any(|f| f == "multiple") {
            format!("{body} [{body} ...]")
        } else {
            body
        };
        if flags.iter().any(|f| f == "optional") {
            format!("[{body}]")
        } else {
            body
        }
    };
    list(args).iter().map(one).collect::<Vec<_>>().join(" ")
}

struct Expected {
    name: &'static str,
    syntax: &'static str,
    arity: i64,
    flags: &'static [&'static str],
    /// COMMAND INFO's legacy first key, last key, step.
    range: [i64; 3],
    key_flags: &'static [&'static str],
    find_keys: &'static str,
    /// A call and the keys COMMAND GETKEYS finds in it.
    getkeys: &'static [(&'static str, &'static [&'static str])],
    /// Calls of the wrong arity.
    wrong_arity: &'static [&'static str],
}

/// What most commands share: one key, the first argument; they write to it.
const ONE_KEY_WRITE: Expected = Expected {
    name: "",
    syntax: "",
    arity: 0,
    flags: &["write", "denyoom", "fast"],
    range: [1, 1, 1],
    key_flags: &["RW", "access", "update"],
    find_keys: "range",
    getkeys: &[],
    wrong_arity: &[],
};

/// As `ONE_KEY_WRITE`, for the commands that only read their key.
const ONE_KEY_READ: Expected = Expected {
    flags: &["readonly", "fast"],
    key_flags: &["RO", "access"],
    ..ONE_KEY_WRITE
};

const COMMANDS: [Expected; 13] = [
    Expected {
        name: "throttle.take",
        syntax: "key capacity rate [TOKENS tokens] [MAXWAIT maxwait] [TICKET] [FLOOR floor] \
            [INFLIGHT inflight] [LEASE lease] [LINE place_ms] [WAITER waiter_id]",
        arity: -4,
        getkeys: &[
            ("THROTTLE.TAKE k 8 9", &["k"]),
            ("THROTTLE.TAKE k2 8 9 TOKENS 2 MAXWAIT 5 TICKET", &["k2"]),
            (
                "THROTTLE.TAKE k3 8 9 INFLIGHT 1 LEASE 9 LINE 100 WAITER 7",
                &["k3"],
            ),
        ],
        wrong_arity: &["THROTTLE.TAKE", "THROTTLE.TAKE k", "THROTTLE.TAKE k 8"],
        ..ONE_KEY_WRITE
    },
    Expected {
        name: "throttle.mtake",
        syntax: "numkeys key [key ...] capacity rate tokens [capacity rate tokens ...] \
                 [MAXWAIT maxwait] [FLOOR floor [floor ...]] [TICKET] [INFLIGHT inflight] \
                 [LEASE lease] [LINE place_ms] [WAITER waiter_id]",
        arity: -6,
        flags: &["write", "denyoom", "fast", "movablekeys"],
        range: [0, 0, 0],
        key_flags: &["RW", "access", "update"],
        find_keys: "keynum",
        getkeys: &[
            ("THROTTLE.MTAKE 1 k 8 9 1", &["k"]),
            ("THROTTLE.MTAKE 2 {a}x {a}y 8 9 1 8 9 1", &["{a}x", "{a}y"]),
            (
                "THROTTLE.MTAKE 3 a b c 8 9 1 8 9 1 8 9 1 MAXWAIT 5",
                &["a", "b", "c"],
            ),
            (
                "THROTTLE.MTAKE 2 {a}x {a}y 8 9 1 8 9 1 TICKET MAXWAIT 5",
                &["{a}x", "{a}y"],
            ),
            (
                "THROTTLE.MTAKE 2 {a}x {a}y 8 9 1 8 9 1 INFLIGHT 2 LEASE 1000",
                &["{a}x", "{a}y"],
            ),
            (
                "THROTTLE.MTAKE 2 {a}x {a}y 8 9 1 8 9 1 INFLIGHT 2 LEASE 9 LINE 100 WAITER 7",
                &["{a}x", "{a}y"],
            ),
        ],
        wrong_arity: &["THROTTLE.MTAKE 1 k 8 9", "THROTTLE.MTAKE 1"],
    },
    Expected {
        name: "throttle.pause",
        syntax: "key capacity rate ms",
        arity: 5,
        getkeys: &[("THROTTLE.PAUSE k 8 9 1000", &["k"])],
        wrong_arity: &["THROTTLE.PAUSE k 8 9", "THROTTLE.PAUSE k 8 9 1000 5"],
        ..ONE_KEY_WRITE
    },
    Expected {
        name: "throttle.give",
        syntax: "key capacity rate n ticket",
        arity: 6,
        getkeys: &[("THROTTLE.GIVE k 8 9 1 1764547200000000", &["k"])],
        wrong_arity: &["THROTTLE.GIVE k 8 9 1", "THROTTLE.GIVE k 8 9 1 2 3"],
        ..ONE_KEY_WRITE
    },
    Expected {
        name: "throttle.peek",
        syntax: "key capacity rate",
        arity: 4,
        getkeys: &[("THROTTLE.PEEK k 8 9", &["k"])],
        wrong_arity: &["THROTTLE.PEEK k 8", "THROTTLE.PEEK k 8 9 TOKENS 0"],
        ..ONE_KEY_READ
    },
    Expected {
        name: "throttle.cut",
        syntax: "key capacity rate ms factor recovery_ms",
        arity: 7,
        getkeys: &[("THROTTLE.CUT k 8 9 1000 0.7 30000", &["k"])],
        wrong_arity: &[
            "THROTTLE.CUT k 8 9 1000 0.7",
            "THROTTLE.CUT k 8 9 1000 0.7 1 2",
        ],
        ..ONE_KEY_WRITE
    },
    Expected {
        name: "throttle.sync",
        syntax: "key capacity rate remaining reset_ms",
        arity: 6,
        getkeys: &[("THROTTLE.SYNC k 8 9 3 1000", &["k"])],
        wrong_arity: &["THROTTLE.SYNC k 8 9 3", "THROTTLE.SYNC k 8 9 3 1000 1"],
        ..ONE_KEY_WRITE
    },
    Expected {
        name: "throttle.debit",
        syntax: "key capacity rate n",
        arity: 5,
        getkeys: &[("THROTTLE.DEBIT k 8 9 25", &["k"])],
        wrong_arity: &["THROTTLE.DEBIT k 8 9", "THROTTLE.DEBIT k 8 9 1 2"],
        ..ONE_KEY_WRITE
    },
    Expected {
        name: "throttle.renew",
        syntax: "key capacity rate slot ms",
        arity: 6,
        getkeys: &[("THROTTLE.RENEW k 8 9 1 1000", &["k"])],
        wrong_arity: &["THROTTLE.RENEW k 8 9 1", "THROTTLE.RENEW k 8 9 1 2 3"],
        ..ONE_KEY_WRITE
    },
    Expected {
        name: "throttle.release",
        syntax: "key capacity rate slot [INFLIGHT inflight]",
        arity: -5,
        getkeys: &[
            ("THROTTLE.RELEASE k 8 9 1", &["k"]),
            ("THROTTLE.RELEASE k 8 9 1 INFLIGHT 4", &["k"]),
        ],
        wrong_arity: &["THROTTLE.RELEASE k 8 9"],
        ..ONE_KEY_WRITE
    },
    Expected {
        name: "throttle.slots",
        syntax: "key capacity rate",
        arity: 4,
        getkeys: &[("THROTTLE.SLOTS k 8 9", &["k"])],
        wrong_arity: &["THROTTLE.SLOTS k 8", "THROTTLE.SLOTS k 8 9 1"],
        ..ONE_KEY_READ
    },
    Expected {
        name: "throttle.resume",
        syntax: "key capacity rate",
        arity: 4,
        getkeys: &[("THROTTLE.RESUME k 8 9", &["k"])],
        wrong_arity: &["THROTTLE.RESUME k 8", "THROTTLE.RESUME k 8 9 1000"],
        ..ONE_KEY_WRITE
    },
    Expected {
        name: "throttle.quota",
        syntax: "key capacity rate [CLEAR]",
        arity: -4,
        getkeys: &[
            ("THROTTLE.QUOTA k 8 9", &["k"]),
            ("THROTTLE.QUOTA k2 8 9 CLEAR", &["k2"]),
        ],
        wrong_arity: &["THROTTLE.QUOTA", "THROTTLE.QUOTA k 8"],
        ..ONE_KEY_WRITE
    },
];

/// The table above is every command, and each row agrees with the command's own definition
/// (the spec the module registers): so the servers below are checked against both.
#[test]
fn the_table_is_every_commands_spec() {
    let names: Vec<&str> = Command::ALL.iter().map(|c| c.name()).collect();
    let rows: Vec<&str> = COMMANDS.iter().map(|want| want.name).collect();
    assert_eq!(rows, names);
    for (want, command) in COMMANDS.iter().zip(Command::ALL) {
        let spec = command.spec();
        assert_eq!(spec.syntax(), want.syntax, "{}", want.name);
        assert_eq!(i64::from(spec.arity), want.arity, "{}", want.name);
        assert_eq!(
            spec.flags.contains("readonly"),
            want.flags.contains(&"readonly"),
            "{}",
            want.name
        );
    }
}

fn docs(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    for want in &COMMANDS {
        let reply = ok(&mut con, &format!("COMMAND DOCS {}", want.name));
        let items = list(&reply);
        assert_eq!(items.len(), 2, "COMMAND DOCS {}: {reply:?}", want.name);
        assert_eq!(text(&items[0]), want.name);
        let doc = &items[1];
        let summary = text(must(doc, "summary"));
        assert!(summary.len() > 20, "{}: summary {summary:?}", want.name);
        assert_eq!(text(must(doc, "since")), "1.0.0", "{}", want.name);
        assert_eq!(text(must(doc, "group")), "module", "{}", want.name);
        assert_eq!(text(must(doc, "module")), "throttle", "{}", want.name);
        assert!(
            text(must(doc, "complexity")).starts_with("O("),
            "{}: {doc:?}",
            want.name
        );
        let args = must(doc, "arguments");
        assert_eq!(syntax(args), want.syntax, "{}: {args:?}", want.name);
        // The key is typed as a key, numbers as numbers.
        for arg in list(args) {
            let name = text(must(arg, "name"));
            let kind = text(must(arg, "type"));
            let expected = match name.as_str() {
                "key" => "key",
                "rate" | "factor" => "double",
                "quota" | "floors" => "block",
                "ticket" if want.name != "throttle.give" => "pure-token",
                "clear" => "pure-token",
                _ => "integer",
            };
            assert_eq!(kind, expected, "{} argument {name}", want.name);
            if kind == "key" {
                assert_eq!(must(arg, "key_spec_index"), &Value::Int(0));
            }
        }
        println!("{flavor}: {} {}", want.name.to_uppercase(), want.syntax);
    }
}

fn info(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    for want in &COMMANDS {
        let reply = ok(&mut con, &format!("COMMAND INFO {}", want.name));
        let [info] = list(&reply) else {
            panic!("COMMAND INFO {}: {reply:?}", want.name);
        };
        let info = list(info);
        assert_eq!(text(&info[0]), want.name);
        assert_eq!(info[1], Value::Int(want.arity), "{} arity", want.name);
        let mut flags = strings(&info[2]);
        flags.retain(|f| f != "module");
        assert_eq!(flags, want.flags, "{} flags", want.name);
        let range: Vec<Value> = want.range.iter().map(|&n| Value::Int(n)).collect();
        assert_eq!(info[3..6], range[..], "{} first/last/step", want.name);
        let specs = list(&info[8]);
        assert_eq!(specs.len(), 1, "{}: {specs:?}", want.name);
        let spec = &specs[0];
        assert_eq!(
            strings(must(spec, "flags")),
            want.key_flags,
            "{} key spec",
            want.name
        );
        let begin = must(spec, "begin_search");
        assert_eq!(text(must(begin, "type")), "index");
        assert_eq!(must(must(begin, "spec"), "index"), &Value::Int(1));
        let find = must(spec, "find_keys");
        assert_eq!(text(must(find, "type")), want.find_keys, "{}", want.name);
        let find_spec = must(find, "spec");
        let numbers: &[(&str, i64)] = if want.find_keys == "keynum" {
            &[("keynumidx", 0), ("firstkey", 1), ("keystep", 1)]
        } else {
            &[("lastkey", 0), ("keystep", 1), ("limit", 0)]
        };
        for (name, value) in numbers {
            assert_eq!(
                must(find_spec, name),
                &Value::Int(*value),
                "{} {name}",
                want.name
            );
        }
    }
}

fn getkeys(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    for want in &COMMANDS {
        for (call, keys) in want.getkeys {
            let reply = ok(&mut con, &format!("COMMAND GETKEYS {call}"));
            assert_eq!(strings(&reply), *keys, "COMMAND GETKEYS {call}");
        }
    }
    // A numkeys that points past the arguments: the server's error, not a crash.
    for call in [
        "THROTTLE.MTAKE 9 a b 1 1 1 1",
        "THROTTLE.MTAKE -1 a b 1 1 1 1",
        "THROTTLE.MTAKE x a b 1 1 1 1",
    ] {
        let reply = run(&mut con, &format!("COMMAND GETKEYS {call}"));
        assert!(reply.is_err(), "COMMAND GETKEYS {call}: {reply:?}");
    }
    assert_eq!(ok(&mut con, "PING"), Value::SimpleString("PONG".into()));
}

/// The server checks the arity when a call is queued: the call is refused there, and EXEC
/// aborts the whole transaction (nothing in it runs).
fn wrong_arity_aborts_multi(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    for want in &COMMANDS {
        for call in want.wrong_arity {
            assert_eq!(ok(&mut con, "MULTI"), Value::Okay);
            assert_eq!(
                ok(&mut con, "SET canary 1"),
                Value::SimpleString("QUEUED".into())
            );
            let error = run(&mut con, call).expect_err(call);
            assert_eq!(
                error,
                format!("ERR wrong number of arguments for '{}' command", want.name),
                "{call} in MULTI"
            );
            let exec = run(&mut con, "EXEC").expect_err("EXEC after a refused call");
            assert!(exec.starts_with("EXECABORT"), "{call}: EXEC said {exec}");
            assert_eq!(
                ok(&mut con, "EXISTS canary"),
                Value::Int(0),
                "{call}: the transaction ran"
            );
        }
    }
}

/// A one-node cluster that owns every slot: Redis checks the slots of a command's keys
/// before running it, so keys in different slots get the server's own CROSSSLOT, and keys
/// with one hash tag reach the module.
fn cluster_crossslot(flavor: Flavor) {
    let server = one_node_cluster(Server::builder(flavor));
    let mut con = server.conn();

    let error = run(&mut con, "THROTTLE.MTAKE 2 a b 5 1 1 5 1 1").expect_err("CROSSSLOT");
    assert!(error.starts_with("CROSSSLOT "), "{error}");
    let error = run(&mut con, "THROTTLE.MTAKE 3 {s}a {s}b c 5 1 1 5 1 1 5 1 1")
        .expect_err("CROSSSLOT with one key outside the tag");
    assert!(error.starts_with("CROSSSLOT "), "{error}");
    // One hash tag: one slot, so the server runs the command: two fresh buckets of 5 at 1/s
    // give one token each, read at one instant.
    let same = ok(&mut con, "THROTTLE.MTAKE 2 {s}a {s}b 5 1 1 5 1 1");
    let ints = [1, 0, 4, 1000, 4, 1000].map(Value::Int).to_vec();
    assert_eq!(same, Value::Array(ints));
    assert_eq!(
        strings(&ok(
            &mut con,
            "COMMAND GETKEYS THROTTLE.MTAKE 2 {s}a {s}b 5 1 1 5 1 1"
        )),
        ["{s}a", "{s}b"]
    );
}

per_server!(
    docs,
    info,
    getkeys,
    wrong_arity_aborts_multi,
    cluster_crossslot
);

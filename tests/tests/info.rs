//! `INFO throttle`, on every server: the module's version (as `MODULE LIST` has it too), the counters since load move exactly as a known sequence
//! of calls says, and the eviction field (and the log's warning) follow the maxmemory policy,
//! also when it is changed at runtime with CONFIG SET.

use throttle_e2e::{info_field, ok, per_server, run, Connection, Flavor, Server, Value};

fn info_throttle(con: &mut Connection) -> String {
    match ok(con, "INFO throttle") {
        Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Value::VerbatimString { text, .. } => text,
        other => panic!("INFO throttle: {other:?}"),
    }
}

/// `throttle_<name>` from `INFO throttle`, as a number.
#[track_caller]
fn counter(info: &str, name: &str) -> u64 {
    let field = format!("throttle_{name}");
    info_field(info, &field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO throttle has no number {field}:\n{info}"))
}

const COUNTERS: [&str; 29] = [
    "calls_take",
    "calls_mtake",
    "calls_pause",
    "calls_give",
    "calls_peek",
    "calls_cut",
    "calls_sync",
    "calls_debit",
    "calls_renew",
    "calls_release",
    "calls_slots",
    "calls_resume",
    "granted",
    "reserved",
    "denied",
    "held_by_floor",
    "held_by_slots",
    "slots_renewed",
    "slots_released",
    "line_joined",
    "line_handed",
    "line_left",
    "tokens_given_back",
    "pauses",
    "cuts",
    "resumes",
    "syncs_lowered",
    "tokens_debited",
    "errors",
];

#[track_caller]
fn assert_counters(con: &mut Connection, expected: &[(&str, u64)]) {
    let info = info_throttle(con);
    for name in COUNTERS {
        let want = expected
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| *v);
        assert_eq!(counter(&info, name), want, "throttle_{name} in\n{info}");
    }
}

/// THROTTLE.TAKE: every call counts once in calls_take, and once as granted (reserved when
/// the caller must wait), denied, or an error. A call the server refuses for its arity never
/// reaches the module and is not counted.
fn take_counters(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let info = info_throttle(&mut con);
    assert!(info.starts_with("# throttle"), "{info}");
    assert_counters(&mut con, &[]);

    // Capacity 2, one token per 1000 s: nothing refills while the test runs.
    let replies = [
        ok(&mut con, "THROTTLE.TAKE a 2 0.001"),
        ok(&mut con, "THROTTLE.TAKE a 2 0.001"),
        ok(&mut con, "THROTTLE.TAKE a 2 0.001"),
        // The next token is 1000 s away: reserved with a 2000 s MAXWAIT.
        ok(&mut con, "THROTTLE.TAKE a 2 0.001 MAXWAIT 2000000"),
    ];
    let granted: Vec<i64> = replies
        .iter()
        .map(|reply| match reply {
            Value::Array(items) => match items.first() {
                Some(Value::Int(g)) => *g,
                _ => panic!("{reply:?}"),
            },
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(granted, [1, 1, 0, 1], "{replies:?}");

    let _ = ok(&mut con, "RPUSH list x");
    for (words, prefix) in [
        ("THROTTLE.TAKE a 0 1", "ERR"),
        ("THROTTLE.TAKE list 2 1", "WRONGTYPE"),
    ] {
        let error = run(&mut con, words).expect_err(words);
        assert!(error.starts_with(prefix), "{words}: {error}");
    }
    let error = run(&mut con, "THROTTLE.TAKE a 2").expect_err("arity");
    assert!(error.contains("wrong number of arguments"), "{error}");

    assert_counters(
        &mut con,
        &[
            ("calls_take", 6),
            ("granted", 3),
            ("reserved", 1),
            ("denied", 1),
            ("errors", 2),
        ],
    );
    // The server's own count of calls that reached the command agrees.
    let stats = match ok(&mut con, "INFO commandstats") {
        Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Value::VerbatimString { text, .. } => text,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        throttle_testkit::command_stat(&stats, "throttle.take", "calls"),
        Some(6),
        "{stats}"
    );
}

/// The other commands: `calls_*` counts every call, errors included; a pause counts in
/// `pauses`, and what THROTTLE.GIVE says it gave back in `tokens_given_back`.
fn other_counters(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();

    let _ = ok(&mut con, "THROTTLE.PEEK p 5 1");
    let error = run(&mut con, "THROTTLE.PEEK p 0 1").expect_err("capacity 0");
    assert!(error.starts_with("ERR"), "{error}");

    let paused = ok(&mut con, "THROTTLE.PAUSE q 5 1 1000");
    assert!(matches!(paused, Value::Int(ms) if ms >= 1000), "{paused:?}");

    let taken = ok(&mut con, "THROTTLE.TAKE g 5 0.001 TOKENS 2 TICKET");
    let Value::Array(items) = &taken else {
        panic!("TAKE ... TICKET: {taken:?}");
    };
    let Some(Value::Int(ticket)) = items.get(4) else {
        panic!("TAKE ... TICKET has no ticket: {taken:?}");
    };
    let given = ok(&mut con, &format!("THROTTLE.GIVE g 5 0.001 2 {ticket}"));
    let Value::Int(given) = given else {
        panic!("GIVE: {given:?}");
    };
    assert_eq!(given, 2, "nothing was taken after the ticket");

    let _ = ok(&mut con, "THROTTLE.MTAKE 2 {m}a {m}b 5 1 1 5 1 1");
    let error = run(&mut con, "THROTTLE.MTAKE 2 {m}a {m}b 5 1 1 5 1 9").expect_err("9 > 5");
    assert!(error.starts_with("ERR"), "{error}");
    // A slot in the first key, then that one slot held: denied, held by slots.
    let slotted = "THROTTLE.MTAKE 2 {s}a {s}b 5 1 1 5 1 1 INFLIGHT 1 LEASE 60000";
    let _ = ok(&mut con, slotted);
    let _ = ok(&mut con, slotted);

    assert_counters(
        &mut con,
        &[
            ("calls_take", 1),
            ("calls_mtake", 4),
            ("calls_pause", 1),
            ("calls_give", 1),
            ("calls_peek", 2),
            // The take with TICKET, the first MTAKE and the first with INFLIGHT.
            ("granted", 3),
            ("denied", 1),
            ("held_by_slots", 1),
            ("tokens_given_back", 2),
            ("pauses", 1),
            ("errors", 2),
        ],
    );
}

/// The supplier's pushback: a THROTTLE.CUT counts in `pauses` and, when it cuts the rate (not
/// the same episode as a pause on), in `cuts`; a SYNC that lowers or pauses the bucket in
/// `syncs_lowered`; what DEBIT takes in `tokens_debited`; a RESUME that ended a pause or a cut
/// in `resumes` (one with nothing to end only in `calls_resume`).
fn pushback_counters(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    for call in [
        "THROTTLE.CUT c 10 1 1000 0.5 30000",
        "THROTTLE.CUT c 10 1 1000 0.5 30000",
        "THROTTLE.SYNC s 10 1 4 0",
        "THROTTLE.SYNC s 10 1 4 0",
        "THROTTLE.SYNC s 10 1 9 0",
        "THROTTLE.DEBIT d 10 1 7",
        "THROTTLE.DEBIT d 10 1 25",
        "THROTTLE.RESUME c 10 1",
        "THROTTLE.RESUME c 10 1",
        "THROTTLE.RESUME never-paused 10 1",
    ] {
        let _ = ok(&mut con, call);
    }
    let error = run(&mut con, "THROTTLE.CUT c 10 1 1000 2 30000").expect_err("factor 2");
    assert!(error.starts_with("ERR factor"), "{error}");
    assert_counters(
        &mut con,
        &[
            ("calls_cut", 3),
            ("calls_sync", 3),
            ("calls_debit", 2),
            ("calls_resume", 3),
            ("pauses", 2),
            ("cuts", 1),
            ("resumes", 1),
            ("syncs_lowered", 1),
            ("tokens_debited", 32),
            ("errors", 1),
        ],
    );
}

/// The line for a slot: a caller joins (`line_joined`), a release hands the slot to the head
/// (`line_handed`), and a waiter that stopped looking is dropped at the next write of the
/// line (`line_left`).
fn line_counters(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let line = "THROTTLE.TAKE l 100 1000 INFLIGHT 1 LEASE 60000 LINE";
    let Value::Array(held) = ok(&mut con, &format!("{line} 60000")) else {
        panic!("TAKE ... LINE");
    };
    let Some(Value::Int(holder)) = held.get(4) else {
        panic!("no slot: {held:?}");
    };
    let _ = ok(&mut con, &format!("{line} 60000"));
    // A place of 50 ms, which it lets run out.
    let _ = ok(&mut con, &format!("{line} 50"));
    std::thread::sleep(std::time::Duration::from_millis(100));
    let _ = ok(&mut con, &format!("THROTTLE.RELEASE l 100 1000 {holder}"));
    assert_counters(
        &mut con,
        &[
            ("calls_take", 3),
            ("calls_release", 1),
            ("granted", 1),
            ("denied", 2),
            ("held_by_slots", 2),
            ("slots_released", 1),
            ("line_joined", 2),
            ("line_handed", 1),
            ("line_left", 1),
        ],
    );
}

/// The module crate's version, as its manifest says: `(text, MAJOR * 10000 + MINOR * 100 +
/// PATCH)`.
fn module_version() -> (String, u64) {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../module/Cargo.toml");
    let text = std::fs::read_to_string(manifest).unwrap_or_else(|err| panic!("{manifest}: {err}"));
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or_else(|| panic!("no version in {manifest}"))
        .to_owned();
    let parts: Vec<u64> = version
        .split(['.', '-', '+'])
        .take(3)
        .map(|p| p.parse().unwrap_or_else(|_| panic!("version {version}")))
        .collect();
    let [major, minor, patch] = parts[..] else {
        panic!("version {version}");
    };
    (version, major * 10_000 + minor * 100 + patch)
}

/// The words of a reply, flattened (RESP2 arrays and RESP3 maps alike), as text.
fn words(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Array(items) | Value::Set(items) => items.iter().for_each(|v| words(v, out)),
        Value::Map(pairs) => pairs.iter().for_each(|(k, v)| {
            words(k, out);
            words(v, out);
        }),
        Value::BulkString(bytes) => out.push(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => out.push(text.clone()),
        Value::Int(n) => out.push(n.to_string()),
        other => out.push(format!("{other:?}")),
    }
}

/// Which build is loaded: `MODULE LIST` gives the crate's version as one number (0.1.0 is
/// 100), `INFO throttle` that number and the text, `INFO modules` the number.
fn the_version_is_the_crates(flavor: Flavor) {
    let (text, number) = module_version();
    let server = Server::start(flavor);
    let mut con = server.conn();
    let mut listed = Vec::new();
    words(&ok(&mut con, "MODULE LIST"), &mut listed);
    let at = listed
        .iter()
        .position(|w| w == "throttle")
        .unwrap_or_else(|| panic!("MODULE LIST: {listed:?}"));
    let ver = listed[at..]
        .windows(2)
        .find(|pair| pair[0] == "ver")
        .map(|pair| pair[1].clone());
    assert_eq!(ver, Some(number.to_string()), "MODULE LIST: {listed:?}");

    let info = info_throttle(&mut con);
    assert_eq!(counter(&info, "version"), number, "{info}");
    assert_eq!(
        info_field(&info, "throttle_version_text"),
        Some(text.as_str()),
        "{info}"
    );
    let modules = match ok(&mut con, "INFO modules") {
        Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Value::VerbatimString { text, .. } => text,
        other => panic!("INFO modules: {other:?}"),
    };
    assert!(
        modules.contains(&format!("name=throttle,ver={number},")),
        "{modules}"
    );
}

fn eviction(info: &str) -> &str {
    info_field(info, "throttle_eviction").unwrap_or_else(|| panic!("no eviction field:\n{info}"))
}

const LOG_WARNING: &str = "can evict buckets";

/// `maxmemory 100mb` + `allkeys-lru`: INFO and the log warn. CONFIG SET to noeviction clears
/// it (and says so in the log), `volatile-lru` warns again: every bucket has a TTL, so
/// volatile-* policies pick buckets too.
fn eviction_policy_warns(flavor: Flavor) {
    let server = Server::builder(flavor)
        .arg("maxmemory", "100mb")
        .arg("maxmemory-policy", "allkeys-lru")
        .start();
    let mut con = server.conn();
    let info = info_throttle(&mut con);
    assert_eq!(eviction(&info), "possible", "{info}");
    let warning = info_field(&info, "throttle_eviction_warning").unwrap_or_default();
    assert!(warning.contains("noeviction"), "{info}");
    let log = server.log();
    let line = log
        .lines()
        .find(|l| l.contains(LOG_WARNING))
        .unwrap_or_else(|| panic!("no eviction warning at load:\n{log}"));
    assert!(
        line.contains("allkeys-lru") && line.contains("noeviction"),
        "{line}"
    );

    let _ = ok(&mut con, "CONFIG SET maxmemory-policy noeviction");
    let info = info_throttle(&mut con);
    assert_eq!(eviction(&info), "no", "{info}");
    assert_eq!(
        info_field(&info, "throttle_eviction_warning"),
        None,
        "{info}"
    );
    assert!(
        server.log().contains("no longer evicts buckets"),
        "{}",
        server.log()
    );

    let _ = ok(&mut con, "CONFIG SET maxmemory-policy volatile-lru");
    assert_eq!(eviction(&info_throttle(&mut con)), "possible");
    let log = server.log();
    assert!(
        log.lines()
            .any(|l| l.contains(LOG_WARNING) && l.contains("volatile-lru")),
        "no warning after CONFIG SET maxmemory-policy volatile-lru:\n{log}"
    );
}

/// `noeviction` (the default) with a maxmemory, and an evicting policy without maxmemory
/// (nothing is evicted without a limit): no warning. Setting the limit at runtime warns.
fn no_eviction_no_warning(flavor: Flavor) {
    let server = Server::builder(flavor)
        .arg("maxmemory", "100mb")
        .arg("maxmemory-policy", "noeviction")
        .start();
    let mut con = server.conn();
    assert_eq!(eviction(&info_throttle(&mut con)), "no");

    let unlimited = Server::builder(flavor)
        .arg("maxmemory", "0")
        .arg("maxmemory-policy", "allkeys-lfu")
        .start();
    let mut con = unlimited.conn();
    assert_eq!(eviction(&info_throttle(&mut con)), "no");
    for server in [&server, &unlimited] {
        let log = server.log();
        assert!(!log.contains(LOG_WARNING), "{log}");
    }

    let _ = ok(&mut con, "CONFIG SET maxmemory 100mb");
    assert_eq!(eviction(&info_throttle(&mut con)), "possible");
    let log = unlimited.log();
    assert!(
        log.lines()
            .any(|l| l.contains(LOG_WARNING) && l.contains("allkeys-lfu")),
        "{log}"
    );
}

/// A replica ignores its maxmemory (`replica-ignore-maxmemory yes`, the default), so it loads
/// the module without a warning; promoted, its policy evicts, and it says so.
fn a_promoted_replica_warns(flavor: Flavor) {
    let primary = Server::start(flavor);
    let replica = Server::builder(flavor)
        .replica_of(&primary)
        .arg("maxmemory", "100mb")
        .arg("maxmemory-policy", "volatile-ttl")
        .start();
    replica.wait_replica_synced(&primary);
    let mut con = replica.conn();
    assert_eq!(eviction(&info_throttle(&mut con)), "no");
    assert!(!replica.log().contains(LOG_WARNING), "{}", replica.log());

    let _ = ok(&mut con, "REPLICAOF NO ONE");
    assert_eq!(eviction(&info_throttle(&mut con)), "possible");
    let log = replica.log();
    assert!(
        log.lines()
            .any(|l| l.contains(LOG_WARNING) && l.contains("volatile-ttl")),
        "no warning once promoted:\n{log}"
    );
}

per_server!(
    the_version_is_the_crates,
    take_counters,
    other_counters,
    pushback_counters,
    line_counters,
    eviction_policy_warns,
    no_eviction_no_warning,
    a_promoted_replica_warns
);

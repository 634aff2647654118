//! The library and the script announce a pause as the module does: the same message on the
//! same shard channel for every key shape, and nothing for a call that changes no pause; and a
//! slot freed from a full table (`RELEASE ... INFLIGHT n`) the same way, and only then.

use throttle_e2e::{Announced, Server, Subscriber};
use throttle_testkit::Flavor;

use crate::script::{command, load, Runner};

/// What each runner's calls announce, per key shape: a key without a hash tag, one with, and
/// one with a `}` that cannot be a tag (announced on the key itself).
pub fn announces_the_same(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let sha = load(&mut con);
    let mut heard_by = vec![];
    for runner in [Runner::Module, Runner::Library, Runner::Script] {
        let mut heard = vec![];
        for key in [
            format!("plain:{runner:?}"),
            format!("{{tag}}:{runner:?}"),
            format!("b}}{runner:?}"),
        ] {
            let channel = channel_of(&key);
            let mut subscriber = Subscriber::new(server.conn(), &channel);
            let keys = [key.clone()];
            let before = throttle_e2e::server_time_ns(&mut con) / 1000;
            for (name, args) in [
                ("pause", "10 10 1500"),
                ("pause", "10 10 1000"),
                ("take", "10 10"),
                ("cut", "10 10 1000 0.5 30000"),
                ("pause", "10 10 60000"),
                ("sync", "10 10 0 120000"),
                ("sync", "10 10 0 1000"),
                ("cut", "10 10 180000 0.5 30000"),
            ] {
                let args: Vec<&str> = args.split_whitespace().collect();
                let _: redis::Value = command(runner, &sha, name, &keys, &args)
                    .query(&mut con)
                    .unwrap_or_else(|e| panic!("{runner:?} {name} {key}: {e}"));
            }
            let after = throttle_e2e::server_time_ns(&mut con) / 1000;
            for _ in 0..4 {
                let announced = subscriber.announcement();
                assert_eq!(announced.channel, channel, "{runner:?} {key}");
                // The ticket is the state after the pause (quota 10 10: fill 1000 ms, a token
                // 100 ms), which moves with the clock: held to the clock here, the rest byte
                // for byte across the runners.
                let p = announced.pause_ms;
                let earliest = Announced::expected_ticket(before / 1000 * 1000, p, 1000, 100); // Redis 7.0: whole ms
                let latest = Announced::expected_ticket(after, p, 1000, 100);
                assert!(
                    (earliest..=latest).contains(&announced.ticket_us),
                    "{runner:?} {key}: {announced:?} not between {earliest} and {latest}"
                );
                heard.push(format!("{} {}", announced.pause_ms, announced.factor_bp));
            }
        }
        assert_eq!(
            heard,
            ["1500 10000", "60000 10000", "120000 10000", "180000 10000"].repeat(3),
            "{flavor} {runner:?}: the announcements"
        );
        heard_by.push(heard);
    }
    assert!(heard_by.windows(2).all(|w| w[0] == w[1]));
}

/// A fleet user with the twin's ACL lines (`&throttle:pause:*`) pausing a key that announces
/// on its own name (a `}` and no tag, or an empty tag `{}`): the announcement is refused, and
/// the call fails with nothing written, since the library and the script announce before they
/// write. A key that announces under `throttle:pause:` pauses as usual.
pub fn a_refused_announcement_writes_nothing(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut admin = server.conn();
    let sha = load(&mut admin);
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(
            "fleet on nopass resetkeys ~quota:* resetchannels &throttle:pause:* -@all +fcall \
             +fcall_ro +evalsha +evalsha_ro +get +set +del +time +spublish"
                .split_whitespace()
                .collect::<Vec<_>>(),
        )
        .query(&mut admin)
        .expect("ACL SETUSER");
    let mut fleet = throttle_e2e::conn_as(&server, "fleet");
    for runner in [Runner::Library, Runner::Script] {
        for key in [
            format!("quota:a}}{runner:?}"),
            format!("quota:{{}}{runner:?}"),
        ] {
            assert_eq!(
                throttle_bucket::pause_channel(key.as_bytes()),
                key.as_bytes()
            );
            let keys = [key.clone()];
            let refused: redis::RedisResult<i64> =
                command(runner, &sha, "pause", &keys, &["10", "10", "1500"]).query(&mut fleet);
            let error = refused
                .expect_err("the announcement is refused")
                .to_string();
            assert!(error.contains("channel"), "{runner:?} {key}: {error}");
            let exists: i64 = redis::cmd("EXISTS").arg(&key).query(&mut admin).unwrap();
            assert_eq!(exists, 0, "{runner:?} {key}: a refused pause wrote");
        }
        let keys = [format!("quota:{{t}}{runner:?}")];
        let next: i64 = command(runner, &sha, "pause", &keys, &["10", "10", "1500"])
            .query(&mut fleet)
            .expect("a tagged key announces under throttle:pause:");
        assert_eq!(next, 1500, "{runner:?}");
    }
}

/// `RELEASE ... INFLIGHT n` announces `freed` only when the slot it frees was one of `n` held:
/// not for a table below its cap, a slot not held, or a release without INFLIGHT. A probe
/// pause after the releases marks the end, so that a message that should not be there is seen.
pub fn announces_a_freed_slot_the_same(flavor: Flavor) {
    on_each_runner(flavor, "slots", |runner, subscriber, call| {
        // The reply's last integer: the slot a take holds, whether a release freed one.
        let mut call = |name: &str, args: &str| *call(name, args).last().expect("an integer");
        let take = "10 10 TOKENS 0 INFLIGHT 2 LEASE 60000";
        let (a, b) = (call("take", take), call("take", take));
        // Full (2 of 2): freed and announced; then 1 of 2: freed, not announced.
        assert_eq!(call("release", &format!("10 10 {a} INFLIGHT 2")), 1);
        assert_eq!(call("release", &format!("10 10 {b} INFLIGHT 2")), 1);
        // Full again, released without INFLIGHT, and a release of a slot not held: silent.
        let (c, d) = (call("take", take), call("take", take));
        assert_eq!(call("release", &format!("10 10 {c}")), 1);
        assert_eq!(call("release", &format!("10 10 {c} INFLIGHT 2")), 0);
        // A cap larger than what is held: not full, silent; the same slot at its true cap.
        let e = call("take", take);
        assert_eq!(call("release", &format!("10 10 {d} INFLIGHT 3")), 1);
        assert!(call("take", take) > 0, "a slot again");
        assert_eq!(call("release", &format!("10 10 {e} inflight 2")), 1);
        call("pause", "10 10 1000");
        let heard = heard_before_the_probe(subscriber, flavor, runner);
        let freed = throttle_bucket::SLOT_FREED;
        assert_eq!(heard, [freed, freed], "{flavor} {runner:?}: {heard:?}");
    });
}

/// A release that hands a slot to the line announces `handed <id> <wait_ms>` for the first
/// waiter handed, with or without INFLIGHT n, from the module, the library and the script
/// alike; the last release, with nobody in line, `freed`.
pub fn announces_a_hand_off_the_same(flavor: Flavor) {
    on_each_runner(flavor, "line", |runner, subscriber, call| {
        // One token every 1000 s: the holder takes it, the second waiter's is there later.
        let line = "1 0.001 MAXWAIT 315360000000 INFLIGHT 1 LEASE 60000 LINE 5000";
        let holder = call("take", line);
        assert_eq!(holder[0], 1, "{flavor} {runner:?}: {holder:?}");
        let first = call("take", "1 0.001 TOKENS 0 INFLIGHT 1 LEASE 60000 LINE 5000");
        let second = call("take", line);
        assert_eq!(
            first[4..],
            [first[4], 1, 20],
            "{flavor} {runner:?}: {first:?}"
        );
        assert_eq!(
            second[4..],
            [second[4], 2, 20],
            "{flavor} {runner:?}: {second:?}"
        );
        assert_eq!(call("release", &format!("1 0.001 {}", holder[4])), [1]);
        assert_eq!(
            call("release", &format!("1 0.001 {} INFLIGHT 1", first[4])),
            [1]
        );
        assert_eq!(
            call("release", &format!("1 0.001 {} INFLIGHT 1", second[4])),
            [1]
        );
        let heard = next_messages(subscriber, 3);
        assert_eq!(
            heard[0],
            format!("handed {} 0", first[4]),
            "{flavor} {runner:?}"
        );
        let words: Vec<&str> = heard[1].split(' ').collect();
        assert_eq!(
            words[..2],
            ["handed", &second[4].to_string()],
            "{flavor} {runner:?}"
        );
        let wait: i64 = words[2].parse().expect("ms");
        assert!(
            (990_000..=1_000_000).contains(&wait),
            "{flavor} {runner:?}: {heard:?}"
        );
        assert_eq!(heard[2], throttle_bucket::SLOT_FREED, "{flavor} {runner:?}");
    });
}

/// A take whose settling of the line hands a slot (the holder's lease ran out with a waiter in
/// line) announces `handed <id> <wait_ms>` for that waiter, with LINE (the caller joins behind)
/// or without (the caller is denied), from the module, the library and the script alike; the
/// handed waiter's own look hands nothing and announces nothing. A probe pause marks the end.
pub fn announces_a_hand_off_at_a_take_the_same(flavor: Flavor) {
    on_each_runner(flavor, "take-line", |runner, subscriber, call| {
        let sleep = || std::thread::sleep(std::time::Duration::from_millis(300));
        // Leases of 200 ms: the holder's runs out while a waiter is in line.
        let line = "10 10 INFLIGHT 1 LEASE 200 LINE 5000";
        let holder = call("take", line);
        assert_eq!(holder[0], 1, "{flavor} {runner:?}: {holder:?}");
        let first = call("take", line);
        assert_eq!(first[5..], [1, 20], "{flavor} {runner:?}: {first:?}");
        sleep();
        // Another caller's LINE take hands the slot to `first`, and joins behind it.
        let other = call("take", line);
        assert_eq!(other[0], 0, "{flavor} {runner:?}: {other:?}");
        assert_eq!(other[5..], [1, 20], "{flavor} {runner:?}: {other:?}");
        let look = call("take", &format!("{line} WAITER {}", first[4]));
        assert_eq!(look[0], 1, "{flavor} {runner:?}: {look:?}");
        assert_eq!(look[4..], [first[4], 0], "{flavor} {runner:?}: {look:?}");
        sleep();
        // `first`'s lease ran out: a take without LINE hands the slot to `other`, and is
        // denied (every slot held).
        let plain = call("take", "10 10 INFLIGHT 1 LEASE 200");
        assert_eq!(plain[0], 0, "{flavor} {runner:?}: {plain:?}");
        call("pause", "10 10 1000");
        let heard = heard_before_the_probe(subscriber, flavor, runner);
        assert_eq!(
            heard,
            [
                format!("handed {} 0", first[4]),
                format!("handed {} 0", other[4])
            ],
            "{flavor} {runner:?}: {heard:?}"
        );
    });
}

/// A multi-take's line: a release hands the slot to a waiter of several keys with no tokens
/// (`handed <id> 0`), and that waiter's look, whose second key's tokens are gone, passes the
/// slot on to the next waiter and announces it; from the module, the library and the script
/// alike. A probe pause marks the end.
pub fn announces_a_multi_take_passing_its_slot_on_the_same(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let sha = load(&mut con);
    for runner in [Runner::Module, Runner::Library, Runner::Script] {
        let first = format!("{{mtake-line}}:{runner:?}:a");
        let second = format!("{{mtake-line}}:{runner:?}:b");
        let mut subscriber = listen_to(&server, &first);
        let mut call = |name: &str, keys: &[&String], args: &str| {
            let keys: Vec<String> = keys.iter().map(|k| (*k).clone()).collect();
            call_ints(&mut con, (runner, &sha), name, &keys, args)
        };
        let both = [&first, &second];
        let line = "10 10 1 10 1 1 INFLIGHT 1 LEASE 60000 LINE 5000";
        let holder = call("mtake", &both, line);
        assert_eq!(holder[0], 1, "{flavor} {runner:?}: {holder:?}");
        let waiter = call("mtake", &both, line);
        assert_eq!(waiter[7..], [1, 20], "{flavor} {runner:?}: {waiter:?}");
        let next = call("take", &[&first], "10 10 INFLIGHT 1 LEASE 60000 LINE 5000");
        assert_eq!(next[5..], [2, 20], "{flavor} {runner:?}: {next:?}");
        let released = call(
            "release",
            &[&first],
            &format!("10 10 {} INFLIGHT 1", holder[6]),
        );
        assert_eq!(released, [1], "{flavor} {runner:?}");
        // The second key's tokens gone: the waiter's look is refused for them (1), and the
        // slot goes on to `next`.
        call("debit", &[&second], "10 1 10");
        let look = call("mtake", &both, &format!("{line} WAITER {}", waiter[6]));
        assert_eq!(look[0], 0, "{flavor} {runner:?}: {look:?}");
        assert_eq!(look[6..], [0, 0, 1], "{flavor} {runner:?}: {look:?}");
        call("pause", &[&first], "10 10 1000");
        let heard = heard_before_the_probe(&mut subscriber, flavor, runner);
        assert_eq!(
            heard,
            [
                format!("handed {} 0", waiter[6]),
                format!("handed {} 0", next[4])
            ],
            "{flavor} {runner:?}: {heard:?}"
        );
    }
}

/// On a fresh server, `check` for the module, the library and the script in turn, each with a
/// key of its own (`{tag}:<runner>`), a subscriber to that key's channel, and `call(name,
/// args)`: the command `name` on that key through that runner, its reply's integers.
fn on_each_runner(
    flavor: Flavor,
    tag: &str,
    mut check: impl FnMut(Runner, &mut Subscriber, &mut dyn FnMut(&str, &str) -> Vec<i64>),
) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let sha = load(&mut con);
    for runner in [Runner::Module, Runner::Library, Runner::Script] {
        let keys = [format!("{{{tag}}}:{runner:?}")];
        let mut subscriber = listen_to(&server, &keys[0]);
        let mut call =
            |name: &str, args: &str| call_ints(&mut con, (runner, &sha), name, &keys, args);
        check(runner, &mut subscriber, &mut call);
    }
}

/// The shard channel `key`'s pauses and freed or handed slots are announced on.
fn channel_of(key: &str) -> String {
    String::from_utf8(throttle_bucket::pause_channel(key.as_bytes())).expect("a text channel")
}

/// A subscriber to `key`'s channel, on a connection of its own.
fn listen_to(server: &Server, key: &str) -> Subscriber {
    Subscriber::new(server.conn(), &channel_of(key))
}

/// The payloads of the next `n` messages.
fn next_messages(subscriber: &mut Subscriber, n: usize) -> Vec<String> {
    (0..n).map(|_| subscriber.message()[1].clone()).collect()
}

/// The two messages before the probe pause (10 10 1000) that ends a test's calls, so that a
/// message that should not be there is seen; the third must be the probe's.
fn heard_before_the_probe(
    subscriber: &mut Subscriber,
    flavor: Flavor,
    runner: Runner,
) -> Vec<String> {
    let mut heard = next_messages(subscriber, 3);
    assert!(
        heard[2].starts_with("1000 "),
        "{flavor} {runner:?}: {heard:?}"
    );
    heard.truncate(2);
    heard
}

/// `name` on `keys` with `args` (words) through `runner` (and the script's `sha`): its reply's
/// integers, one for an integer reply.
fn call_ints(
    con: &mut redis::Connection,
    (runner, sha): (Runner, &str),
    name: &str,
    keys: &[String],
    args: &str,
) -> Vec<i64> {
    let args: Vec<&str> = args.split_whitespace().collect();
    let value: redis::Value = command(runner, sha, name, keys, &args)
        .query(con)
        .unwrap_or_else(|e| panic!("{runner:?} {name} {args:?}: {e}"));
    match value {
        redis::Value::Int(n) => vec![n],
        other => throttle_e2e::ints(&other),
    }
}

//! The server's clock stepped under a bucket in use, with libfaketime (Debian's `faketime`
//! package): an hour back and forward again, a day forward and back again.
//!
//! The server runs with `LD_PRELOAD=libfaketimeMT.so.1` and `FAKETIME_TIMESTAMP_FILE` naming
//! a file that holds an offset from the real clock (`+0s`, `-3600s`, `+86400s`). With
//! `FAKETIME_NO_CACHE=1` libfaketime reads the file at every clock call, so rewriting it
//! steps the server's wall clock at once (the file is replaced by a rename, so no read sees
//! half a file). The `faketime` wrapper cannot be used for this: it sets `FAKETIME`, which
//! libfaketime prefers to the file. `FAKETIME_DONT_FAKE_MONOTONIC=1` leaves the monotonic
//! clock alone: the server's timers (serverCron) run on it and would stall for an hour if it
//! were stepped back too; the bucket reads the wall clock (the cached command time), which is
//! what is stepped. Every step is checked twice: `TIME`, and the module's own clock (the
//! state a 1-token, 10^9-per-second bucket writes is that clock plus 1 ns).
//!
//! Servers: Redis 8.2, Valkey 8.1 and Valkey 9.1. Not Redis 7.0: Debian's build links
//! jemalloc dynamically and does not come up under libfaketime ("Cannot recover from
//! unexpected recursive calls to clock_gettime()"), a known clash of the two.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use throttle_e2e::*;
use throttle_testkit::FakeClock;

const HOUR_S: i64 = 3600;
const DAY_S: i64 = 24 * HOUR_S;
const NS_PER_S: i64 = 1_000_000_000;

/// How far `TIME` and the module's clock may be from the real clock plus the offset once a
/// step has been seen: far below the steps (an hour, a day), far above any scheduling delay.
const SEEN_WITHIN_NS: i64 = 30 * NS_PER_S;
/// Deadline for the server to show a new offset (libfaketime rereads the file at once).
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

// Debian's Redis 7.0 hangs at start under libfaketime (see the module comment).
on_servers!(
    [redis_8_2 Redis82, valkey_8_1 Valkey81, valkey_9_1 Valkey91]
    stepped_back_an_hour,
    stepped_forward_a_day
);

// ---------------------------------------------------------------------------------------
// The fake clock.

/// A server's fake clock (the kit's) and the offset the test has set it to.
struct SteppedClock {
    clock: FakeClock,
    offset_s: i64,
}

impl SteppedClock {
    /// Offset 0, in a fresh directory of its own.
    fn new(flavor: Flavor, test: &str) -> SteppedClock {
        SteppedClock {
            clock: FakeClock::new(&format!("clock-{}-{test}", flavor.name()), 0),
            offset_s: 0,
        }
    }

    /// Starts a server (module loaded) on this clock, and checks it sees it.
    fn start(&self, flavor: Flavor) -> Server {
        let server = self.clock.server(flavor).start();
        self.assert_seen(&mut server.conn());
        server
    }

    /// Steps the server's wall clock to the real one plus `offset_s`, and waits (bounded)
    /// until `TIME` and the module both read it.
    fn step(&mut self, con: &mut Connection, offset_s: i64) {
        self.clock.set(offset_s);
        self.offset_s = offset_s;
        self.assert_seen(con);
    }

    /// The real clock plus the offset, in ns.
    fn expected_ns(&self) -> i64 {
        real_now_ns() + self.offset_s * NS_PER_S
    }

    /// Waits (bounded) until `TIME` and the module's clock both read the real clock plus the
    /// offset, to within [`SEEN_WITHIN_NS`].
    #[track_caller]
    fn assert_seen(&self, con: &mut Connection) {
        let offset = self.offset_s;
        within(
            &format!(
                "TIME and the module's clock to read the real clock {offset:+} s (is \
                 libfaketime preloaded?)"
            ),
            STEP_TIMEOUT,
            || {
                let want = self.expected_ns();
                let off = (server_time_ns(con) - want, module_now_ns(con) - want);
                (off.0.abs() < SEEN_WITHIN_NS && off.1.abs() < SEEN_WITHIN_NS).then_some(())
            },
        );
    }
}

/// The real clock, in ns since the epoch.
fn real_now_ns() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("the real clock is after 1970");
    i64::try_from(since.as_nanos()).expect("before 2262")
}

/// The module's clock: a fresh 1-token bucket at 10^9 tokens per second writes now + 1 ns.
fn module_now_ns(con: &mut Connection) -> i64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let key = format!("probe:{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let mut pipe = redis::pipe();
    pipe.atomic()
        .add_command(line(&format!("THROTTLE.TAKE {key} 1 1000000000")))
        .ignore()
        .cmd("GET")
        .arg(&key)
        .cmd("DEL")
        .arg(&key)
        .ignore();
    let (raw,): (Vec<u8>,) = pipe
        .query(con)
        .unwrap_or_else(|e| panic!("clock probe: {}", error_text(&e)));
    state_of(&raw) - 1
}

/// `count` x `THROTTLE.TAKE key <args>` in one MULTI: the cached clock is the same for all
/// of them (these servers all have it), so the replies do not depend on the machine's speed.
fn takes_at_one_instant(con: &mut Connection, key: &str, args: &str, count: i64) -> Vec<Reply> {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for _ in 0..count {
        pipe.add_command(line(&format!("THROTTLE.TAKE {key} {args}")));
    }
    let replies: Vec<Value> = pipe
        .query(con)
        .unwrap_or_else(|e| panic!("MULTI with {count} x THROTTLE.TAKE: {}", error_text(&e)));
    replies.iter().map(as_reply).collect()
}

/// Remaining tokens of a bucket whose state is `tat`, read at `now` (the module's rule).
fn remaining_at(capacity: i64, interval: i64, tat: i64, now: i64) -> i64 {
    let debt = (tat - now).max(0);
    ((capacity * interval - debt).max(0) / interval).min(capacity)
}

// ---------------------------------------------------------------------------------------
// The cases.

/// An hour back in the middle of a run: no token is created (a denied take stays denied,
/// `TOKENS 0` shows no more than before, the state never moves back); once the clock is
/// where it would have been (the original time plus what elapsed), the bucket is what it
/// would have been, and grants come at the configured rate.
fn stepped_back_an_hour(flavor: Flavor) {
    let mut clock = SteppedClock::new(flavor, "back");
    let server = clock.start(flavor);
    let mut con = server.conn();

    // Capacity 5, 10 tokens/s: one token every 100 ms.
    const Q: &str = "5 10";
    const CAP: i64 = 5;
    const INTERVAL: i64 = 100_000_000;

    // A bucket in use, emptied: 5 granted, the 6th denied for one interval. In one MULTI, so
    // the cached clock is the same for all six, however slow the machine.
    let replies = takes_at_one_instant(&mut con, "back:run", Q, CAP + 1);
    for (k, reply) in (1..).zip(&replies[..CAP as usize]) {
        assert_eq!(*reply, [1, CAP - k, 0, k * 100], "take {k}: {replies:?}");
    }
    let denied = replies[CAP as usize];
    assert_eq!(denied, [0, 0, 100, 500], "the 6th: {replies:?}");
    let before = take(&mut con, "back:run", &format!("{Q} TOKENS 0"));
    let tat = state(&mut con, "back:run");

    // A second bucket, emptied too, for a reservation while the clock is back.
    for _ in 0..CAP {
        assert_eq!(take(&mut con, "back:reserve", Q)[0], 1);
    }
    let reserve_tat = state(&mut con, "back:reserve");

    clock.step(&mut con, -HOUR_S);
    // Over 600 ms of real time (6 intervals; with a steady clock the bucket would be full
    // again), the bucket gives nothing.
    let run_until = Instant::now() + Duration::from_millis(600);
    let mut rounds = 0;
    while Instant::now() < run_until {
        rounds += 1;
        let reply = take(&mut con, "back:run", Q);
        assert_eq!(
            reply[..2],
            [0, 0],
            "round {rounds}, clock an hour back: a take was granted: {reply:?}"
        );
        // The wait reads an hour longer: the bucket is only stricter.
        assert!(reply[2] > (HOUR_S - 60) * 1000, "{reply:?}");
        let reply = take(&mut con, "back:run", &format!("{Q} MAXWAIT 60000"));
        assert_eq!(reply[0], 0, "a reservation within a minute: {reply:?}");
        let view = take(&mut con, "back:run", &format!("{Q} TOKENS 0"));
        assert_eq!(view[..3], [1, 0, 0], "{view:?}");
        assert!(
            view[1] <= before[1] && view[3] >= before[3],
            "TOKENS 0 shows more than before the step: {view:?} vs {before:?}"
        );
        assert_eq!(
            state(&mut con, "back:run"),
            tat,
            "round {rounds}: the state moved"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A reservation long enough is granted, and moves the state on from where it was, not
    // from the clock: one interval later, never earlier.
    let reply = take(&mut con, "back:reserve", &format!("{Q} MAXWAIT 7200000"));
    assert_eq!(reply[..2], [1, 0], "{reply:?}");
    assert!(reply[2] > (HOUR_S - 60) * 1000, "{reply:?}");
    assert_eq!(state(&mut con, "back:reserve"), reserve_tat + INTERVAL);

    // Caught up: the original time plus what has elapsed.
    clock.step(&mut con, 0);
    let t0 = server_time_ns(&mut con);
    let view = take(&mut con, "back:run", &format!("{Q} TOKENS 0"));
    let t1 = server_time_ns(&mut con);
    // TIME has whole µs; the module's clock may be up to 1 µs on either side of it.
    let (lo, hi) = (
        remaining_at(CAP, INTERVAL, tat, t0 - 1000),
        remaining_at(CAP, INTERVAL, tat, t1 + 1000),
    );
    assert!(
        (lo..=hi).contains(&view[1]),
        "caught up: TOKENS 0 {view:?}, the state {tat} gives {lo}..={hi} at TIME {t0}..{t1}"
    );

    // Empty it again (in one MULTI: what is there, and no more), then reserve one token at a
    // time for a second, sleeping as told: grants come every 100 ms. Client-side, each
    // grant's instant is the token's instant plus at most that call's lag (its round trip +
    // sleep overshoot + 1 ms of rounding up of wait_ms), so the span from the first to the
    // last grant is (n - 1) intervals within the largest lag. A call that found its token
    // already there (wait 0: the machine kept the loop away for a whole interval) restarts
    // the schedule, so the span is measured from the last such call.
    let drain = takes_at_one_instant(&mut con, "back:run", Q, CAP + 1);
    let drained = drain.iter().take_while(|r| r[0] == 1).count();
    assert!(
        drained <= CAP as usize && drain[drained..].iter().all(|r| r[..2] == [0, 0]),
        "at one instant, a take after a denial was granted, or {CAP} + 1 were: {drain:?}"
    );
    let mut grants = Vec::new();
    let mut max_lag = Duration::ZERO;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        let called = Instant::now();
        let reply = take(&mut con, "back:run", &format!("{Q} MAXWAIT 1000"));
        assert_eq!(reply[0], 1, "a one-token reservation: {reply:?}");
        if reply[2] > 0 {
            assert_eq!(
                reply[1], 0,
                "a reservation that waits leaves nothing: {reply:?}"
            );
        }
        let slept = Duration::from_millis(reply[2] as u64);
        std::thread::sleep(slept);
        let at = Instant::now();
        if reply[2] == 0 {
            grants.clear();
            max_lag = Duration::ZERO;
        }
        max_lag = max_lag.max(at - called - slept + Duration::from_millis(1));
        grants.push(at);
    }
    let n = grants.len() as u32;
    let span = *grants.last().unwrap() - grants[0];
    let ideal = Duration::from_nanos(INTERVAL as u64) * (n - 1);
    println!(
        "{flavor}: an hour back for {rounds} rounds, no token; after catching up, {n} grants \
         in {span:?} (ideal {ideal:?}, largest lag {max_lag:?})"
    );
    // At 10/s a second holds at most 11 grants (one at each end); fewer only if the machine
    // held the loop up, which the lag shows.
    assert!(n <= 11, "{n} one-token reservations in 1 s at 10/s");
    assert!(
        n >= 2,
        "one grant in a second of reservations at 10/s: the loop was held up (lag {max_lag:?})"
    );
    assert!(
        span + max_lag >= ideal && span <= ideal + max_lag,
        "{n} grants spread over {span:?}, but the rate makes it {ideal:?} within the largest \
         lag {max_lag:?}"
    );
}

/// A day forward: however long the bucket sat, at most `capacity` tokens are there. A
/// bucket in debt by more than a day is still in debt. Then back by a day: the states
/// written during that day are a day ahead, and the bucket is only stricter.
fn stepped_forward_a_day(flavor: Flavor) {
    let mut clock = SteppedClock::new(flavor, "forward");
    let server = clock.start(flavor);
    let mut con = server.conn();

    // One token every 1000 s, full in 5000 s: a day is 86 tokens' worth.
    const SLOW: &str = "5 0.001";
    const CAP: i64 = 5;
    const SLOW_INTERVAL: i64 = 1000 * NS_PER_S;
    for _ in 0..CAP {
        assert_eq!(take(&mut con, "fwd:slow", SLOW)[0], 1);
    }
    assert_eq!(take(&mut con, "fwd:slow", SLOW)[..2], [0, 0]);
    // 10 tokens per second, emptied.
    for _ in 0..CAP {
        assert_eq!(take(&mut con, "fwd:fast", "5 10")[0], 1);
    }
    // In debt by 100 000 s (20 x 5 tokens at 1000 s each, the first 5 from the full bucket).
    for _ in 0..20 {
        let reply = take(
            &mut con,
            "fwd:deep",
            "5 0.001 TOKENS 5 MAXWAIT 315360000000",
        );
        assert_eq!(reply[0], 1, "{reply:?}");
    }
    let deep_tat = state(&mut con, "fwd:deep");

    clock.step(&mut con, DAY_S);
    // The slow bucket: exactly 5 of 6 single takes, not 86.
    assert_eq!(
        take(&mut con, "fwd:slow", &format!("{SLOW} TOKENS 0")),
        [1, CAP, 0, 0],
        "a day later TOKENS 0 shows a full bucket, and no more"
    );
    let granted: Vec<i64> = (0..=CAP)
        .map(|_| take(&mut con, "fwd:slow", SLOW)[0])
        .collect();
    assert_eq!(
        granted,
        [1, 1, 1, 1, 1, 0],
        "capacity + 1 takes a day later"
    );
    // The fast bucket: the whole capacity in one take, then nothing.
    assert_eq!(
        take(&mut con, "fwd:fast", "5 10 TOKENS 5")[..3],
        [1, 0, 0],
        "a day later the fast bucket is full"
    );
    let reply = take(&mut con, "fwd:fast", "5 10");
    assert_eq!(
        reply[..2],
        [0, 0],
        "capacity + 1 on the fast bucket: {reply:?}"
    );
    // The deep bucket: a day paid off, 13 600 s of debt left.
    let t0 = server_time_ns(&mut con);
    let reply = take(&mut con, "fwd:deep", "5 0.001");
    let t1 = server_time_ns(&mut con);
    assert_eq!(reply[..2], [0, 0], "still in debt: {reply:?}");
    // The one token is there at tat - (capacity - 1) intervals.
    let at = deep_tat - (CAP - 1) * SLOW_INTERVAL;
    let (lo, hi) = (ceil_ms(at - t1 - 1000), ceil_ms(at - t0 + 1000));
    assert!(
        (lo..=hi).contains(&reply[2]),
        "deep: wait {} ms, the state gives {lo}..={hi}",
        reply[2]
    );
    assert_eq!(state(&mut con, "fwd:deep"), deep_tat);

    // The day forward wrote states a day ahead of the real clock; back there, the buckets
    // read as a day in debt: nothing is granted and the states stay.
    let slow_tat = state(&mut con, "fwd:slow");
    let fast_tat = state(&mut con, "fwd:fast");
    clock.step(&mut con, 0);
    for (key, quota, tat) in [("fwd:slow", SLOW, slow_tat), ("fwd:fast", "5 10", fast_tat)] {
        let reply = take(&mut con, key, quota);
        assert_eq!(reply[..2], [0, 0], "{key} back a day: {reply:?}");
        assert!(reply[2] > (DAY_S - 6000) * 1000, "{key}: {reply:?}");
        let view = take(&mut con, key, &format!("{quota} TOKENS 0"));
        assert_eq!(view[1], 0, "{key}: {view:?}");
        assert_eq!(state(&mut con, key), tat, "{key}: the state moved back");
    }
    println!("{flavor}: a day forward gave capacity and no more; a day back gave nothing");
}

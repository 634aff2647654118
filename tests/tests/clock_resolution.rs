//! The module's clock has microseconds on every server, Redis 7.0 included (which has no
//! cached microsecond clock: the module reads its monotonic counter inside the wall clock's
//! millisecond).
//!
//! `THROTTLE.TAKE fast 1 100000` is one token every 10 µs with no burst. A millisecond clock
//! grants at most one call per distinct millisecond it reads, and calls that the client saw
//! span `E` ms read at most `floor(E) + 2` distinct milliseconds (the span can begin just
//! before one millisecond ends and end just after another begins): that bound is exact, and
//! a millisecond clock never beats it. Calls spaced more than 10 µs apart on a microsecond
//! clock are each granted, far above it.

use std::time::{Duration, Instant};

use throttle_e2e::{per_server, take_any, Connection, Flavor, Server};

const CALLS: usize = 200;
/// Between calls, on top of the round trip: well above the 10 µs interval. Spun rather than
/// slept, since a sleep on a loaded machine can last a millisecond.
const GAP: Duration = Duration::from_micros(100);
/// A loaded machine can make one round slow enough (over ~1 ms per call) to say nothing; a
/// millisecond clock can never pass, however many rounds run.
const ROUNDS: usize = 5;

fn spin(gap: Duration) {
    let start = Instant::now();
    while start.elapsed() < gap {
        std::hint::spin_loop();
    }
}

fn microsecond_grants(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let mut figures = Vec::new();
    for round in 0..ROUNDS {
        let key = format!("fast:{round}");
        let start = Instant::now();
        let mut granted = 0;
        for _ in 0..CALLS {
            granted += take_any(&mut con, &key, "1 100000")[0];
            spin(GAP);
        }
        let elapsed = start.elapsed();
        let ms_clock_bound = i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX - 2) + 2;
        let line = format!(
            "{flavor}: round {round}: {CALLS} calls in {:.1} ms, {granted} granted; a \
             millisecond clock grants at most {ms_clock_bound}",
            elapsed.as_secs_f64() * 1000.0
        );
        println!("{line}");
        figures.push(line);
        if granted > ms_clock_bound {
            return;
        }
    }
    panic!(
        "no round granted more than a millisecond clock could:\n{}",
        figures.join("\n")
    );
}

/// The instant the module uses stays inside the wall clock's millisecond. A take with TICKET
/// on a fresh key of capacity 1 at 1 token/s replies the state right after it, `now + 1 s`,
/// in µs; `now` lies between the whole millisecond of the server's `TIME` before the call and
/// its `TIME` after it.
fn instant_follows_the_wall_clock(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let time_us = |con: &mut Connection| -> i64 {
        let (secs, micros): (i64, i64) = redis::cmd("TIME").query(con).expect("TIME");
        secs * 1_000_000 + micros
    };
    for i in 0..50 {
        let key = format!("wall:{i}");
        let before = time_us(&mut con);
        let reply = take_any(&mut con, &key, "1 1 TICKET");
        let after = time_us(&mut con);
        assert_eq!(reply[..4], [1, 0, 0, 1000], "{reply:?}");
        let now_us = reply[4] - 1_000_000;
        let low = before / 1000 * 1000;
        assert!(
            low <= now_us && now_us <= after,
            "call {i}: the module's instant {now_us} µs is outside [{low}, {after}] (TIME \
             before and after the call)"
        );
        spin(Duration::from_micros(i * 20));
    }
}

per_server!(microsecond_grants, instant_follows_the_wall_clock);

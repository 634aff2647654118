//! A group of commands in one MULTI/EXEC, and checking its replies with the slack its clock
//! allows.
//!
//! On Redis 7.2+ and Valkey a MULTI freezes the module's clock (the cached command time), so
//! replies inside one are exact. Redis 7.0's clock moves inside a MULTI, by no more than the
//! client saw the EXEC take: there a duration in a reply may be smaller than the exact one by
//! that much (it only shrinks as time passes), never larger.

use std::time::Instant;

use redis::{Connection, Value};
use throttle_testkit::Flavor;

use crate::command::error_text;
use crate::time::slack_ms;

/// The replies of `cmds` run in one MULTI/EXEC, and the slack their clock allows: 0 where a
/// MULTI freezes the clock (Redis 7.2+, Valkey), else how long the client saw the EXEC take
/// (ms, rounded up, plus one).
#[track_caller]
pub fn exec(con: &mut Connection, flavor: Flavor, cmds: &[redis::Cmd]) -> (Vec<Value>, i64) {
    let mut pipe = redis::pipe();
    pipe.atomic();
    for cmd in cmds {
        pipe.add_command(cmd.clone());
    }
    let start = Instant::now();
    let replies: Vec<Value> = pipe
        .query(con)
        .unwrap_or_else(|e| panic!("MULTI ... EXEC: {}", error_text(&e)));
    let slack = if flavor.has_cached_micros() {
        0
    } else {
        slack_ms(start)
    };
    assert_eq!(replies.len(), cmds.len(), "EXEC replies: {replies:?}");
    (replies, slack)
}

/// Checks a reply against the exact one: every field equal, except the durations at
/// `durations`, which may be up to `slack` ms smaller (the clock moved) and never larger.
#[track_caller]
pub fn assert_reply(got: &[i64], want: &[i64], durations: &[usize], slack: i64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?}, expected {want:?}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let ok = if durations.contains(&i) {
            (w - slack..=*w).contains(g)
        } else {
            g == w
        };
        assert!(
            ok,
            "{what}: element {i} of {got:?} (expected {want:?}, durations {durations:?} \
             within {slack} ms below)"
        );
    }
}

/// Checks a duration reply against the exact one, up to `slack` ms smaller.
#[track_caller]
pub fn assert_duration(got: i64, want: i64, slack: i64, what: &str) {
    assert!(
        (want - slack..=want).contains(&got),
        "{what}: {got} ms, expected {want} (or up to {slack} ms less)"
    );
}

//! Reading a reply: integers, the four of THROTTLE.TAKE, states and strings, each checked to
//! be exactly that shape (in RESP2 and RESP3 alike).

use redis::Value;

use crate::keyspace::state_of;

/// `[granted, remaining, wait_ms, reset_ms]`.
pub type Reply = [i64; 4];

/// A THROTTLE.TAKE reply: exactly an array of four integers, or of five for a denial, whose
/// last says what held it back (a sum of 1, 2, 4 and 8, never 0: [`refusal`] reads it). The
/// four are returned.
#[track_caller]
pub fn as_reply(value: &Value) -> Reply {
    let all = ints(value);
    if let [0, _, _, _, reason] = all[..] {
        assert!(
            (1..=15).contains(&reason),
            "a denial's reason is a sum of 1, 2, 4 and 8, got {value:?}"
        );
    }
    all.get(..4)
        .filter(|_| all.len() == 4 || (all.len() == 5 && all[0] == 0))
        .and_then(|four| four.try_into().ok())
        .unwrap_or_else(|| panic!("expected 4 integers (5 for a denial), got {value:?}"))
}

/// What held a denied THROTTLE.TAKE or MTAKE back: its reply's last integer (1 tokens, 2
/// floor, 4 slot, 8 pause, summed); 0 for a granted reply, which has none.
#[track_caller]
pub fn refusal(value: &Value) -> i64 {
    let all = ints(value);
    match all.first() {
        Some(0) => *all.last().expect("a denial has its integers"),
        Some(1) => 0,
        _ => panic!("expected a take's reply, got {value:?}"),
    }
}

/// An integer reply.
#[track_caller]
pub fn int(value: &Value) -> i64 {
    match value {
        Value::Int(n) => *n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// A number: an integer reply, or a bucket's state (a GET's 8 bytes).
#[track_caller]
pub fn num(value: &Value) -> i64 {
    match value {
        Value::Int(n) => *n,
        Value::BulkString(bytes) => state_of(bytes),
        other => panic!("expected an integer or a state, got {other:?}"),
    }
}

/// An array of integers, and nothing else.
#[track_caller]
pub fn ints(value: &Value) -> Vec<i64> {
    let Value::Array(items) = value else {
        panic!("expected an array of integers, got {value:?}");
    };
    items
        .iter()
        .map(|item| match item {
            Value::Int(n) => *n,
            other => panic!("expected an integer in the reply, got {other:?} in {value:?}"),
        })
        .collect()
}

/// The strings in an array or set reply (flags, categories, keys).
#[track_caller]
pub fn strings(value: &Value) -> Vec<String> {
    let items = match value {
        Value::Array(items) | Value::Set(items) => items,
        other => panic!("expected an array of strings, got {other:?}"),
    };
    items
        .iter()
        .map(|item| match item {
            Value::SimpleString(s) => s.clone(),
            Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            Value::Okay => "OK".to_owned(),
            other => panic!("expected a string, got {other:?} in {value:?}"),
        })
        .collect()
}

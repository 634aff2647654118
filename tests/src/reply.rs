//! Reading a reply: integers, the four of THROTTLE.TAKE, states and strings, each checked to
//! be exactly that shape (in RESP2 and RESP3 alike).

use redis::Value;

use crate::keyspace::state_of;

/// `[granted, remaining, wait_ms, reset_ms]`.
pub type Reply = [i64; 4];

/// A THROTTLE.TAKE reply: exactly an array of four integers.
#[track_caller]
pub fn as_reply(value: &Value) -> Reply {
    ints(value)
        .try_into()
        .unwrap_or_else(|_| panic!("expected 4 integers, got {value:?}"))
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

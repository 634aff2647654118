//! The reply to `THROTTLE.TAKE`: `[granted, remaining, wait_ms, reset_ms]`.

use std::time::Duration;

use redis::Value;

/// One `THROTTLE.TAKE` reply, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TakeReply {
    /// The tokens were taken.
    pub granted: bool,
    /// Whole tokens left after the call (0 while the bucket is in debt).
    pub remaining: u64,
    /// Granted: how long to wait before using the tokens. Denied: until they would be there.
    pub wait: Duration,
    /// Until the bucket is full again.
    pub reset: Duration,
}

/// Decodes a reply; `Err` carries a description of what came back instead.
pub(crate) fn parse(value: &Value) -> Result<TakeReply, String> {
    let unexpected = || format!("expected an array of four integers, got {value:?}");
    let Value::Array(items) = value else {
        return Err(unexpected());
    };
    let [granted, remaining, wait, reset] = items.as_slice() else {
        return Err(unexpected());
    };
    let int = |v: &Value| match v {
        Value::Int(n) => u64::try_from(*n).ok(),
        _ => None,
    };
    let (Some(granted), Some(remaining), Some(wait), Some(reset)) =
        (int(granted), int(remaining), int(wait), int(reset))
    else {
        return Err(unexpected());
    };
    let granted = match granted {
        0 => false,
        1 => true,
        _ => return Err(unexpected()),
    };
    Ok(TakeReply {
        granted,
        remaining,
        wait: Duration::from_millis(wait),
        reset: Duration::from_millis(reset),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(values: &[i64]) -> Value {
        Value::Array(values.iter().copied().map(Value::Int).collect())
    }

    #[test]
    fn decodes_the_four_integers() {
        assert_eq!(
            parse(&ints(&[1, 7, 0, 112])),
            Ok(TakeReply {
                granted: true,
                remaining: 7,
                wait: Duration::ZERO,
                reset: Duration::from_millis(112),
            })
        );
        assert_eq!(
            parse(&ints(&[0, 0, 250, 1000])),
            Ok(TakeReply {
                granted: false,
                remaining: 0,
                wait: Duration::from_millis(250),
                reset: Duration::from_millis(1000),
            })
        );
    }

    #[test]
    fn rejects_every_other_shape() {
        let bad = [
            Value::Nil,
            Value::Okay,
            Value::Int(1),
            Value::SimpleString("OK".into()),
            Value::BulkString(b"1".to_vec()),
            ints(&[]),
            ints(&[1, 2, 3]),
            ints(&[1, 2, 3, 4, 5]),
            ints(&[2, 0, 0, 0]),
            ints(&[1, -1, 0, 0]),
            ints(&[1, 0, -5, 0]),
            Value::Array(vec![
                Value::Int(1),
                Value::BulkString(b"7".to_vec()),
                Value::Int(0),
                Value::Int(0),
            ]),
        ];
        for value in bad {
            let err = parse(&value).unwrap_err();
            assert!(err.contains("four integers"), "{err}");
        }
    }
}

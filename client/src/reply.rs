//! The replies of the THROTTLE commands (module and script alike), decoded.

use std::time::Duration;

use redis::Value;

/// A `THROTTLE.TAKE` reply (`[granted, remaining, wait_ms, reset_ms(, ticket)]`), or a
/// `THROTTLE.MTAKE` reply read as one bucket: the fewest tokens left, the longest reset.
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
    /// With `TICKET`: what `THROTTLE.GIVE` needs to give the tokens back (0: nothing taken).
    pub ticket: u64,
}

/// Decodes a `THROTTLE.TAKE` reply; `Err` describes what came back instead.
pub(crate) fn take(value: &Value) -> Result<TakeReply, String> {
    let unexpected = || format!("expected an array of four or five integers, got {value:?}");
    let ints = integers(value).ok_or_else(unexpected)?;
    let (granted, remaining, wait, reset, ticket) = match ints.as_slice() {
        [g, r, w, t] => (*g, *r, *w, *t, 0),
        [g, r, w, t, ticket] => (*g, *r, *w, *t, *ticket),
        _ => return Err(unexpected()),
    };
    Ok(TakeReply {
        granted: flag(granted).ok_or_else(unexpected)?,
        remaining,
        wait: Duration::from_millis(wait),
        reset: Duration::from_millis(reset),
        ticket,
    })
}

/// Decodes a `THROTTLE.MTAKE` reply for `keys` buckets: `[granted, wait_ms, (remaining,
/// reset_ms) per key]`.
pub(crate) fn mtake(value: &Value, keys: usize) -> Result<TakeReply, String> {
    let unexpected = || {
        format!(
            "expected an array of {} integers (THROTTLE.MTAKE of {keys} keys), got {value:?}",
            2 + 2 * keys
        )
    };
    let ints = integers(value).ok_or_else(unexpected)?;
    let [granted, wait, buckets @ ..] = ints.as_slice() else {
        return Err(unexpected());
    };
    if buckets.len() != 2 * keys || keys == 0 {
        return Err(unexpected());
    }
    let pairs = buckets.chunks_exact(2);
    Ok(TakeReply {
        granted: flag(*granted).ok_or_else(unexpected)?,
        remaining: pairs.clone().map(|p| p[0]).min().unwrap_or(0),
        wait: Duration::from_millis(*wait),
        reset: Duration::from_millis(pairs.map(|p| p[1]).max().unwrap_or(0)),
        ticket: 0,
    })
}

/// Decodes an integer reply (`THROTTLE.PAUSE`, `THROTTLE.GIVE`).
pub(crate) fn integer(value: &Value, command: &str) -> Result<u64, String> {
    match value {
        Value::Int(n) if *n >= 0 => Ok(n.unsigned_abs()),
        other => Err(format!(
            "expected a non-negative integer from {command}, got {other:?}"
        )),
    }
}

/// An array of non-negative integers.
fn integers(value: &Value) -> Option<Vec<u64>> {
    let Value::Array(items) = value else {
        return None;
    };
    items
        .iter()
        .map(|item| match item {
            Value::Int(n) => u64::try_from(*n).ok(),
            _ => None,
        })
        .collect()
}

fn flag(value: u64) -> Option<bool> {
    match value {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(values: &[i64]) -> Value {
        Value::Array(values.iter().copied().map(Value::Int).collect())
    }

    #[test]
    fn decodes_take_with_and_without_ticket() {
        assert_eq!(
            take(&ints(&[1, 7, 0, 112])),
            Ok(TakeReply {
                granted: true,
                remaining: 7,
                wait: Duration::ZERO,
                reset: Duration::from_millis(112),
                ticket: 0,
            })
        );
        assert_eq!(
            take(&ints(&[0, 0, 250, 1000, 0])),
            Ok(TakeReply {
                granted: false,
                remaining: 0,
                wait: Duration::from_millis(250),
                reset: Duration::from_millis(1000),
                ticket: 0,
            })
        );
        assert_eq!(
            take(&ints(&[1, 0, 5, 10, 1_764_547_200_000_123])).map(|r| r.ticket),
            Ok(1_764_547_200_000_123)
        );
    }

    #[test]
    fn decodes_mtake_as_its_tightest_bucket() {
        let reply = mtake(&ints(&[1, 300, 9, 100, 2, 4000]), 2).unwrap();
        assert_eq!(
            (reply.granted, reply.remaining, reply.wait, reply.reset),
            (true, 2, Duration::from_millis(300), Duration::from_secs(4))
        );
        assert!(mtake(&ints(&[1, 300, 9, 100]), 2).is_err());
        assert!(mtake(&ints(&[2, 0, 9, 100]), 1).is_err());
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
            ints(&[1, 2, 3, 4, 5, 6]),
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
            let err = take(&value).unwrap_err();
            assert!(err.contains("four or five integers"), "{err}");
        }
        assert!(integer(&Value::Int(-1), "THROTTLE.GIVE").is_err());
        assert_eq!(integer(&Value::Int(3), "THROTTLE.GIVE"), Ok(3));
    }
}

//! The replies of the THROTTLE commands (module and script alike), decoded.

use std::time::Duration;

use redis::Value;
use throttle_bucket::commands::{Cut, Debit, Give, Pause, Peek, Release, Renew, Sync, Take};
use throttle_bucket::{Command, CutReply, DebitReply, PeekReply, SyncReply, ThrottleCommand};

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
    /// Round trips the call took: 1, or more for the first call of `Backend::Auto` (its
    /// probe) or one that loaded the library or the script again.
    pub round_trips: u32,
}

impl AsRef<TakeReply> for TakeReply {
    fn as_ref(&self) -> &TakeReply {
        self
    }
}

/// A `THROTTLE.MTAKE ... TICKET` reply: read as one bucket, and each bucket's ticket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MTakeTickets {
    pub reply: TakeReply,
    /// In key order; 0 where nothing was taken.
    pub tickets: Vec<u64>,
    /// Each bucket's whole tokens left, in key order.
    pub left: Vec<u64>,
    /// With a cap on calls in flight: the slot's id, for THROTTLE.RENEW and RELEASE.
    pub slot: Option<u64>,
}

impl AsRef<TakeReply> for MTakeTickets {
    fn as_ref(&self) -> &TakeReply {
        &self.reply
    }
}

/// Decodes a `THROTTLE.TAKE` reply; `Err` describes what came back instead.
pub(crate) fn take(value: &Value) -> Result<TakeReply, String> {
    let unexpected = || format!("expected {}, got {value:?}", Take::REPLY_SHAPE);
    let reply = decode::<Take>(value, 1).ok_or_else(unexpected)?;
    Ok(TakeReply {
        granted: reply.granted,
        remaining: reply.remaining,
        wait: Duration::from_millis(reply.wait_ms),
        reset: Duration::from_millis(reply.reset_ms),
        ticket: reply.ticket.unwrap_or(0),
        round_trips: 1,
    })
}

/// Decodes a `THROTTLE.PEEK` reply.
pub(crate) fn peek(value: &Value) -> Result<PeekReply, String> {
    expect::<Peek>(value)
}

/// Decodes a `THROTTLE.MTAKE ... TICKET` reply for `keys` buckets: `[granted, wait_ms,
/// (remaining, reset_ms) per key, ticket per key]`, and with `inflight` (a call with `INFLIGHT
/// n LEASE ms`) the slot's id last, read as one bucket (the fewest tokens left, the longest
/// reset), the tickets and the slot (`None`: none taken).
pub(crate) fn mtake(value: &Value, keys: usize, inflight: bool) -> Result<MTakeTickets, String> {
    let with = if inflight { " INFLIGHT n LEASE ms" } else { "" };
    let unexpected = || {
        format!(
            "expected an array of {} integers (THROTTLE.MTAKE ... TICKET{with} of {keys} \
             keys), got {value:?}",
            2 + 3 * keys + usize::from(inflight)
        )
    };
    // Decoded for the call made: one key's slot and ticket make replies of one length.
    let ints = integers(value).ok_or_else(unexpected)?;
    let reply = throttle_bucket::MTakeReply::decode_for(&ints, keys, true, inflight)
        .ok_or_else(unexpected)?;
    let tickets = reply.tickets.clone().ok_or_else(unexpected)?;
    let buckets = reply.buckets.iter();
    Ok(MTakeTickets {
        reply: TakeReply {
            granted: reply.granted,
            remaining: buckets.clone().map(|b| b.0).min().unwrap_or(0),
            wait: Duration::from_millis(reply.wait_ms),
            reset: Duration::from_millis(buckets.map(|b| b.1).max().unwrap_or(0)),
            ticket: 0,
            round_trips: 1,
        },
        tickets,
        left: reply.buckets.iter().map(|b| b.0).collect(),
        slot: reply.slot.filter(|id| *id > 0),
    })
}

/// Decodes a `THROTTLE.TAKE ... TICKET INFLIGHT n LEASE ms` reply: the take, and the slot's id
/// (0: none taken).
pub(crate) fn take_with_slot(value: &Value) -> Result<(TakeReply, u64), String> {
    let unexpected = || {
        format!("expected an array of six integers (THROTTLE.TAKE ... TICKET INFLIGHT n LEASE ms), got {value:?}")
    };
    let ints = integers(value).ok_or_else(unexpected)?;
    let reply = throttle_bucket::TakeReply::decode_for(&ints, true, true).ok_or_else(unexpected)?;
    Ok((
        TakeReply {
            granted: reply.granted,
            remaining: reply.remaining,
            wait: Duration::from_millis(reply.wait_ms),
            reset: Duration::from_millis(reply.reset_ms),
            ticket: reply.ticket.unwrap_or(0),
            round_trips: 1,
        },
        reply.slot.unwrap_or(0),
    ))
}

/// Decodes a `THROTTLE.CUT` reply (`[cut, next_ms, factor_bp, recovered_ms]`).
pub(crate) fn cut(value: &Value) -> Result<CutReply, String> {
    expect::<Cut>(value)
}

/// Decodes a `THROTTLE.SYNC` reply (`[lowered, remaining, reset_ms]`).
pub(crate) fn sync(value: &Value) -> Result<SyncReply, String> {
    expect::<Sync>(value)
}

/// Decodes a `THROTTLE.DEBIT` reply (`[remaining, reset_ms]`).
pub(crate) fn debit(value: &Value) -> Result<DebitReply, String> {
    expect::<Debit>(value)
}

/// Decodes an integer reply (`THROTTLE.PAUSE`, `THROTTLE.GIVE`).
pub(crate) fn integer(value: &Value, command: Command) -> Result<u64, String> {
    match command {
        Command::Pause => expect::<Pause>(value),
        Command::Renew => expect::<Renew>(value).map(u64::from),
        Command::Release => expect::<Release>(value).map(u64::from),
        _ => expect::<Give>(value),
    }
}

/// A reply of `C` read back, for a call on `keys` keys (1 for all but `THROTTLE.MTAKE`): an
/// integer or an array of integers, as `C` replies, then `C`'s own decoding. `None` for any
/// other shape.
pub(crate) fn decode<C: ThrottleCommand>(value: &Value, keys: usize) -> Option<C::Reply> {
    let ints = match value {
        Value::Int(n) if C::INTEGER_REPLY => vec![*n],
        Value::Array(_) if !C::INTEGER_REPLY => integers(value)?,
        _ => return None,
    };
    C::decode(&ints, keys)
}

/// [`decode`] for a one-key command; `Err` describes what came back instead: `expected an
/// array of six integers from THROTTLE.PEEK, got ...`.
fn expect<C: ThrottleCommand>(value: &Value) -> Result<C::Reply, String> {
    decode::<C>(value, 1).ok_or_else(|| {
        format!(
            "expected {} from {}, got {value:?}",
            C::REPLY_SHAPE,
            C::COMMAND.name().to_uppercase()
        )
    })
}

/// An array of integers.
fn integers(value: &Value) -> Option<Vec<i64>> {
    let Value::Array(items) = value else {
        return None;
    };
    items
        .iter()
        .map(|item| match item {
            Value::Int(n) => Some(*n),
            _ => None,
        })
        .collect()
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
                round_trips: 1,
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
                round_trips: 1,
            })
        );
        assert_eq!(
            take(&ints(&[1, 0, 5, 10, 1_764_547_200_000_123])).map(|r| r.ticket),
            Ok(1_764_547_200_000_123)
        );
    }

    #[test]
    fn decodes_mtake_as_its_tightest_bucket() {
        let MTakeTickets {
            reply,
            tickets,
            left,
            slot,
        } = mtake(&ints(&[1, 300, 9, 100, 2, 4000, 17, 0]), 2, false).unwrap();
        assert_eq!(
            (reply.granted, reply.remaining, reply.wait, reply.reset),
            (true, 2, Duration::from_millis(300), Duration::from_secs(4))
        );
        assert_eq!(tickets, [17, 0]);
        assert_eq!(left, [9, 2], "each bucket's own, in key order");
        assert_eq!(slot, None, "no INFLIGHT, no slot");
        assert!(
            mtake(&ints(&[1, 300, 9, 100, 2, 4000]), 2, false).is_err(),
            "no tickets"
        );
        assert!(mtake(&ints(&[1, 300, 9, 100]), 2, false).is_err());
        assert!(mtake(&ints(&[2, 0, 9, 100, 0]), 1, false).is_err());
        // With INFLIGHT the slot comes last; 0 is none taken. One key's reply with a slot is
        // as long as one with a ticket: read as the call made.
        let with_slot = mtake(&ints(&[1, 0, 9, 100, 2, 4000, 17, 5, 42]), 2, true).unwrap();
        assert_eq!((with_slot.tickets, with_slot.slot), (vec![17, 5], Some(42)));
        let denied = mtake(&ints(&[0, 70, 9, 100, 0, 0]), 1, true).unwrap();
        assert_eq!((denied.reply.granted, denied.slot), (false, None));
        assert!(mtake(&ints(&[1, 0, 9, 100, 2, 4000, 17, 5]), 2, true).is_err());
        assert!(
            mtake(&ints(&[1, 0, 9, 100, 42]), 1, true).is_err(),
            "no ticket"
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
        assert!(integer(&Value::Int(-1), Command::Give).is_err());
        assert_eq!(integer(&Value::Int(3), Command::Give), Ok(3));
    }
}

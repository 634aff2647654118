//! The replies of the THROTTLE commands (module and script alike), decoded: each by the call
//! that asked for it ([`decode`]), which knows the shape its options make; and a take's reply
//! as the waiting loop reads it ([`TakeReply`], [`MTakeTickets`]).

use std::time::Duration;

use redis::Value;
use throttle_bucket::{MTakeReply, ThrottleCommand};

use crate::Error;

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
    /// What the server says held a denial back (`None`: granted, or a server too old to say).
    pub said: Option<throttle_bucket::Refusal>,
    /// In the server's line for a slot: the call's ticket (its slot's id once handed over)
    /// and its place (1: the head).
    pub in_line: Option<(u64, u64)>,
}

impl TakeReply {
    /// A reply no server gave: a decision made in process (the partitions', or a slot heard
    /// handed over), with no round trip, no ticket, no reset and no refusal said.
    pub(crate) fn in_process(granted: bool, remaining: u64, wait: Duration) -> TakeReply {
        TakeReply {
            granted,
            remaining,
            wait,
            reset: Duration::ZERO,
            ticket: 0,
            round_trips: 0,
            said: None,
            in_line: None,
        }
    }
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

impl From<throttle_bucket::TakeReply> for TakeReply {
    /// A `THROTTLE.TAKE` reply, in one round trip.
    fn from(reply: throttle_bucket::TakeReply) -> TakeReply {
        TakeReply {
            granted: reply.granted,
            remaining: reply.remaining,
            wait: Duration::from_millis(reply.wait_ms),
            reset: Duration::from_millis(reply.reset_ms),
            ticket: reply.ticket.unwrap_or(0),
            round_trips: 1,
            said: reply.refusal,
            in_line: reply.slot.zip(reply.place).filter(|(_, place)| *place > 0),
        }
    }
}

impl MTakeTickets {
    /// The grant of a slot heard handed to a call in line, as `ticket`: its tokens were taken
    /// at the hand-off, there after `wait`. No take of its own, so no round trip, no ticket to
    /// give them back with, and no count of tokens left.
    pub(crate) fn handed(ticket: u64, wait: Duration) -> MTakeTickets {
        MTakeTickets {
            reply: TakeReply::in_process(true, 0, wait),
            tickets: vec![0],
            left: Vec::new(),
            slot: Some(ticket),
        }
    }
}

impl From<throttle_bucket::TakeReply> for MTakeTickets {
    /// A `THROTTLE.TAKE` reply as a take of one bucket.
    fn from(reply: throttle_bucket::TakeReply) -> MTakeTickets {
        // 0 is no slot taken.
        let slot = reply.slot.filter(|id| *id > 0);
        let reply = TakeReply::from(reply);
        MTakeTickets {
            tickets: vec![reply.ticket],
            left: vec![reply.remaining],
            reply,
            slot,
        }
    }
}

impl From<MTakeReply> for MTakeTickets {
    /// A `THROTTLE.MTAKE` reply read as one bucket (the fewest tokens left, the longest
    /// reset), each bucket's ticket and tokens left, and the slot.
    fn from(reply: MTakeReply) -> MTakeTickets {
        let left: Vec<u64> = reply.buckets.iter().map(|b| b.0).collect();
        MTakeTickets {
            reply: TakeReply {
                granted: reply.granted,
                remaining: left.iter().copied().min().unwrap_or(0),
                wait: Duration::from_millis(reply.wait_ms),
                reset: Duration::from_millis(reply.buckets.iter().map(|b| b.1).max().unwrap_or(0)),
                ticket: 0,
                round_trips: 1,
                said: reply.refusal,
                in_line: reply.slot.zip(reply.place).filter(|(_, place)| *place > 0),
            },
            tickets: reply.tickets.unwrap_or_default(),
            left,
            slot: reply.slot.filter(|id| *id > 0),
        }
    }
}

/// The reply to `call` read back by `call` itself: an integer or an array of integers, as the
/// command replies, in the shape the call's options make. Anything else is
/// [`Error::UnexpectedReply`]: `expected an array of six integers from THROTTLE.PEEK, got ...`.
pub(crate) fn decode<A: ThrottleCommand>(call: &A, value: &Value) -> Result<A::Reply, Error> {
    let ints = match value {
        Value::Int(n) if A::INTEGER_REPLY => Some(vec![*n]),
        Value::Array(_) if !A::INTEGER_REPLY => integers(value),
        _ => None,
    };
    ints.and_then(|ints| call.decode(&ints))
        .ok_or_else(|| Error::UnexpectedReply {
            reply: format!(
                "expected {} from {}, got {value:?}",
                A::REPLY_SHAPE,
                A::COMMAND.name().to_uppercase()
            ),
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
    use throttle_bucket::{GiveArgs, MTakeArgs, TakeArgs};

    use super::*;

    fn ints(values: &[i64]) -> Value {
        Value::Array(values.iter().copied().map(Value::Int).collect())
    }

    fn call<A: ThrottleCommand>(text: &str) -> A {
        let words: Vec<&[u8]> = text.split_whitespace().map(str::as_bytes).collect();
        A::parse(&words).unwrap()
    }

    fn take(text: &str, value: &Value) -> Result<TakeReply, Error> {
        decode(&call::<TakeArgs>(text), value).map(TakeReply::from)
    }

    fn mtake(text: &str, value: &Value) -> Result<MTakeTickets, Error> {
        decode(&call::<MTakeArgs>(text), value).map(MTakeTickets::from)
    }

    #[test]
    fn decodes_take_with_and_without_ticket() {
        assert_eq!(
            take("8 9", &ints(&[1, 7, 0, 112])).unwrap(),
            TakeReply {
                granted: true,
                remaining: 7,
                wait: Duration::ZERO,
                reset: Duration::from_millis(112),
                ticket: 0,
                round_trips: 1,
                said: None,
                in_line: None,
            }
        );
        assert_eq!(
            take("8 9 TICKET", &ints(&[0, 0, 250, 1000, 0])).unwrap(),
            TakeReply {
                granted: false,
                remaining: 0,
                wait: Duration::from_millis(250),
                reset: Duration::from_millis(1000),
                ticket: 0,
                round_trips: 1,
                said: None,
                in_line: None,
            }
        );
        assert_eq!(
            take("8 9 TICKET", &ints(&[1, 0, 5, 10, 1_764_547_200_000_123]))
                .unwrap()
                .ticket,
            1_764_547_200_000_123
        );
        // With INFLIGHT the slot comes last (0: none taken), read as the call made.
        let inflight = "8 9 TICKET INFLIGHT 2 LEASE 100";
        let slotted = call::<TakeArgs>(inflight);
        let taken = MTakeTickets::from(decode(&slotted, &ints(&[1, 0, 5, 10, 17, 42])).unwrap());
        assert_eq!((taken.tickets, taken.slot), (vec![17], Some(42)));
        let denied = MTakeTickets::from(decode(&slotted, &ints(&[0, 0, 5, 10, 0, 0])).unwrap());
        assert_eq!(denied.slot, None);
        assert!(take(inflight, &ints(&[1, 0, 5, 10, 17])).is_err());
    }

    #[test]
    fn decodes_mtake_as_its_tightest_bucket() {
        let MTakeTickets {
            reply,
            tickets,
            left,
            slot,
        } = mtake(
            "2 a b 10 10 1 25 5 2 TICKET",
            &ints(&[1, 300, 9, 100, 2, 4000, 17, 0]),
        )
        .unwrap();
        assert_eq!(
            (reply.granted, reply.remaining, reply.wait, reply.reset),
            (true, 2, Duration::from_millis(300), Duration::from_secs(4))
        );
        assert_eq!(tickets, [17, 0]);
        assert_eq!(left, [9, 2], "each bucket's own, in key order");
        assert_eq!(slot, None, "no INFLIGHT, no slot");
        let two = "2 a b 10 10 1 25 5 2 TICKET";
        assert!(
            mtake(two, &ints(&[1, 300, 9, 100, 2, 4000])).is_err(),
            "no tickets"
        );
        assert!(mtake(two, &ints(&[1, 300, 9, 100])).is_err());
        assert!(mtake("1 a 10 10 1 TICKET", &ints(&[2, 0, 9, 100, 0])).is_err());
        // With INFLIGHT the slot comes last; 0 is none taken. One key's reply with a slot is
        // as long as one with a ticket: read as the call made.
        let slotted = "2 a b 10 10 1 25 5 2 TICKET INFLIGHT 2 LEASE 100";
        let with_slot = mtake(slotted, &ints(&[1, 0, 9, 100, 2, 4000, 17, 5, 42])).unwrap();
        assert_eq!((with_slot.tickets, with_slot.slot), (vec![17, 5], Some(42)));
        let one = "1 a 10 10 1 TICKET INFLIGHT 2 LEASE 100";
        let denied = mtake(one, &ints(&[0, 70, 9, 100, 0, 0])).unwrap();
        assert_eq!((denied.reply.granted, denied.slot), (false, None));
        assert!(mtake(slotted, &ints(&[1, 0, 9, 100, 2, 4000, 17, 5])).is_err());
        let no_ticket = "1 a 10 10 1 INFLIGHT 2 LEASE 100";
        let slot_only = mtake(no_ticket, &ints(&[1, 0, 9, 100, 42])).unwrap();
        assert_eq!((slot_only.tickets, slot_only.slot), (vec![], Some(42)));
        assert!(mtake(one, &ints(&[1, 0, 9, 100, 42])).is_err(), "no ticket");
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
            let Err(Error::UnexpectedReply { reply }) = take("8 9", &value) else {
                panic!("{value:?} read as a reply");
            };
            assert!(
                reply.contains("four to eight integers from THROTTLE.TAKE"),
                "{reply}"
            );
        }
        let give = call::<GiveArgs>("8 9 1 1764547200000000");
        assert!(decode(&give, &Value::Int(-1)).is_err());
        assert!(
            decode(&give, &ints(&[3])).is_err(),
            "an integer, not an array"
        );
        assert_eq!(decode(&give, &Value::Int(3)).unwrap(), 3);
    }
}

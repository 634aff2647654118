//! `THROTTLE.QUOTA key capacity rate [CLEAR]`: an operator keeps a key's quota at the server,
//! so that every command on the key computes with it whatever quota its caller sends (a
//! contract raised from 10/s to 20/s reaches the whole fleet at its next call, with no
//! redeploy); `CLEAR` gives the key back to its callers' quotas. Its arguments, arithmetic,
//! reply and docs.

use crate::command::Command;
use crate::decision::{Decides, Decision};
use crate::error::ArgError;
use crate::gcra::View;
use crate::reply::{ms_up, wire_reply};
use crate::spec::{Arg, Kind, Spec, CAPACITY, KEY, RATE};
use crate::state::State;
use crate::words::Word;
use crate::Quota;

/// `THROTTLE.QUOTA key capacity rate [CLEAR]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaArgs {
    /// Without `clear`, the quota to keep; with it, the caller's own quota, which the bucket is
    /// read with from then on (as every command's).
    pub quota: Quota,
    /// `CLEAR`: drop the kept quota.
    pub clear: bool,
}

/// THROTTLE.QUOTA's reply: `[changed, remaining, reset_ms]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuotaReply {
    /// The kept quota changed.
    pub changed: bool,
    /// Whole tokens in the bucket now, under the quota in effect after the call.
    pub remaining: u64,
    /// Ms until the bucket is full again, rounded up.
    pub reset_ms: u64,
}

/// `[CLEAR]`.
const CLEAR: Arg = Arg::option("clear", "CLEAR", Kind::PureToken);

/// THROTTLE.QUOTA as the server registers and documents it: a write, like THROTTLE.PAUSE.
pub(crate) static SPEC: Spec = Spec::writes(
    Command::Quota,
    "Keeps a quota for the key at the server: every THROTTLE command on the key then \
        uses it, whatever quota its caller sends, and the key keeps no TTL. With CLEAR, gives \
        the key back to its callers' quotas. The bucket's state instant is kept. Replies \
        [changed, remaining, reset_ms] under the quota in effect after the call.",
    &[KEY, CAPACITY, RATE, CLEAR],
);

impl Decides for QuotaArgs {
    const COMMAND: Command = Command::Quota;
    type Reply = QuotaReply;

    /// Validates the words after the key: `capacity rate [CLEAR]`.
    fn parse(args: &[&[u8]]) -> Result<QuotaArgs, ArgError> {
        let (capacity, rate, option) = match args {
            [capacity, rate] => (capacity, rate, None),
            [capacity, rate, option] => (capacity, rate, Some(option)),
            _ => return Err(ArgError::Arity(Command::Quota)),
        };
        let quota = Quota::parse(capacity, rate)?;
        let clear = match option {
            None => false,
            Some(word) if word.eq_ignore_ascii_case(b"CLEAR") => true,
            Some(_) => return Err(ArgError::UnknownOption(Command::Quota)),
        };
        Ok(QuotaArgs { quota, clear })
    }

    /// The words after the key.
    fn words(&self) -> Vec<Word<'_>> {
        let mut words = self.quota.words().to_vec();
        if self.clear {
            words.push(Word::Text("CLEAR"));
        }
        words
    }

    /// Keeps (or with `clear` drops) `args.quota` for the bucket at `now_ns`.
    ///
    /// The bucket's state instant is kept: the bucket is full again when it would have been, and
    /// its tokens read at the new quota from now (under a quota with the same time to fill, the
    /// same share of the capacity). A lower quota never hands out tokens that were taken: a debt
    /// run up at the old rate is paid at the new one. The pause, the cut and the slots held stay.
    /// Nothing is written (or replicated) when the kept quota does not change.
    fn decide(
        &self,
        stored: Option<&State>,
        now_ns: i64,
    ) -> Result<Decision<QuotaReply>, ArgError> {
        let kept = (!self.clear).then_some(&self.quota);
        // The bucket seen with the quota it keeps from now: `self.quota` either way (after CLEAR,
        // the caller's own).
        let unkept = stored.map(|s| State {
            kept: None,
            ..s.clone()
        });
        let mut bucket = View::at(&self.quota, unkept.as_ref(), now_ns);
        bucket.kept = kept;
        let changed = stored.and_then(|s| s.kept.as_deref()) != kept;
        let reply = QuotaReply {
            changed,
            remaining: bucket.remaining(bucket.debt()),
            reset_ms: ms_up(bucket.debt()),
        };
        // `base` is the stored instant, or `now` for a bucket already full: the same bucket.
        let write = changed.then(|| bucket.write(bucket.base)).flatten();
        Ok(Decision::writing(reply, write))
    }
}

wire_reply!(
    QuotaReply {
        changed,
        remaining,
        reset_ms
    },
    "an array of three integers"
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slots::{Slot, Slots};
    use crate::state::{encode_state, parse_state, Pushback};
    use crate::testing::{call, parse, run, MS, NOW};
    use crate::throttle_command::ThrottleCommand;
    use crate::{PeekArgs, TakeArgs};

    #[test]
    fn a_kept_quota_is_what_every_call_computes_with() {
        // The fleet sends 10 tokens at 10/s; the operator keeps 20 at 20/s.
        let (reply, kept, _) = run::<QuotaArgs>("20 20", None, NOW);
        assert_eq!(reply, [1, 20, 0], "set: a full bucket of 20");
        let state = kept.clone().unwrap();
        assert_eq!(state.kept, Some(Box::new(call::<QuotaArgs>("20 20").quota)));
        // A call with the callers' quota takes from the kept one: 20 in a burst, not 10.
        let mut bucket = kept;
        for n in (0..20).rev() {
            let (reply, after, _) = run::<TakeArgs>("10 10", bucket, NOW);
            assert_eq!(reply[..2], [1, n], "take {}", 20 - n);
            bucket = after;
        }
        let (reply, after, _) = run::<TakeArgs>("10 10", bucket, NOW);
        assert_eq!(
            reply,
            [0, 0, 50, 1000, 1],
            "refilled at 20/s: one token in 50 ms; held back by the tokens (1)"
        );
        // Full again, the key is kept (it would be deleted without a kept quota): no TTL.
        let (reply, full, _) = run::<PeekArgs>("10 10", after.clone(), NOW + 1000 * MS);
        assert_eq!(reply, [1, 20, 0, 0, 0, 10_000]);
        let args: TakeArgs = call("10 10 TOKENS 1");
        let outcome = args.apply(&[full], NOW + 2000 * MS).unwrap();
        let write = outcome.write.unwrap();
        assert_eq!(write.expire_at_ms(), None, "no TTL while a quota is kept");
        assert!(write.stored().unwrap().kept.is_some());
        // Cleared: the callers' quota again, the instant kept.
        let (reply, cleared, _) = run::<QuotaArgs>("10 10 CLEAR", after, NOW);
        assert_eq!(reply, [1, 0, 1000], "in debt 1 s: at 10/s, none left");
        assert_eq!(
            cleared.map(|s| (s.tat, s.kept)),
            Some((NOW + 1000 * MS, None))
        );
    }

    #[test]
    fn the_state_instant_the_pause_and_the_slots_are_kept() {
        let stored = State {
            tat: NOW + 500 * MS,
            pushback: Some(Pushback {
                paused_until: NOW + 2000 * MS,
                cut: None,
            }),
            slots: Slots {
                next_id: 8,
                held: vec![Slot {
                    id: 7,
                    lease_end: NOW + 9000 * MS,
                }],
                ..Slots::default()
            },
            kept: None,
        };
        let (reply, after, _) = run::<QuotaArgs>("4 2", Some(stored.clone()), NOW);
        assert_eq!(
            reply,
            [1, 3, 500],
            "0.5 s of debt at 2/s: one token short of 4"
        );
        let after = after.unwrap();
        assert_eq!(
            (after.tat, after.pushback, &after.slots),
            (stored.tat, stored.pushback, &stored.slots)
        );
        // The same quota again changes nothing and writes nothing.
        let args: QuotaArgs = call("4 2");
        let outcome = args.apply(&[Some(after.clone())], NOW).unwrap();
        assert!(!outcome.reply.changed && outcome.write.is_none());
        // Nothing kept, nothing to clear: no write.
        let args: QuotaArgs = call("4 2 clear");
        let outcome = args.apply(&[None], NOW).unwrap();
        assert!(!outcome.reply.changed && outcome.write.is_none());
    }

    #[test]
    fn a_kept_quota_is_stored_after_the_state_and_read_back() {
        let states = [
            State::plain(NOW),
            State {
                tat: NOW,
                pushback: Some(Pushback {
                    paused_until: NOW + MS,
                    cut: None,
                }),
                slots: Slots::default(),
                kept: None,
            },
            State {
                tat: NOW,
                pushback: None,
                slots: Slots {
                    next_id: 3,
                    held: vec![Slot {
                        id: 2,
                        lease_end: NOW,
                    }],
                    ..Slots::default()
                },
                kept: None,
            },
        ];
        for rate in ["20", "0.000001", "999999999.9", "0.0002777777777777778"] {
            for state in &states {
                let state = State {
                    kept: Some(Box::new(call::<QuotaArgs>(&format!("1 {rate}")).quota)),
                    ..state.clone()
                };
                let bytes = encode_state(&state);
                let bytes = bytes.as_bytes();
                assert_eq!(bytes.last(), Some(&0xFF));
                assert_eq!(usize::from(bytes[bytes.len() - 2]), rate.len());
                assert_eq!(parse_state(bytes, NOW), Ok(state.clone()), "{rate}");
            }
        }
        let kept = State {
            kept: Some(Box::new(call::<QuotaArgs>("7 2.5").quota)),
            ..State::plain(NOW)
        };
        let bytes = encode_state(&kept).as_bytes().to_vec();
        assert_eq!(&bytes[8..], b"\x07\0\0\0\0\0\0\x002.5\x03\xff");
        // A trailer no command writes is not a bucket.
        let with = |at: usize, byte: u8| {
            let mut bad = bytes.clone();
            bad[at] = byte;
            bad
        };
        for bad in [
            with(8, 0),          // capacity 0
            with(16, b'x'),      // a rate that is no number
            with(17, b'0'),      // "200": not 2.5, but a rate all the same: its text
            with(19, 40),        // a length past the value
            with(19, 0),         // no rate
            bytes[1..].to_vec(), // no 8-byte form before it
            [&bytes[..], &[0xFF]].concat(),
        ] {
            let parsed = parse_state(&bad, NOW);
            assert!(
                parsed.is_err() || parsed.as_ref().ok().and_then(|s| s.kept.clone()) != kept.kept,
                "{bad:?}: {parsed:?}"
            );
        }
        assert!(parse_state(&with(16, b'x'), NOW).is_err());
        assert!(parse_state(&with(8, 0), NOW).is_err());
        assert!(parse_state(&bytes[1..], NOW).is_err());
        // A rate written with a trailing zero is not the text a command writes.
        let mut padded = bytes[..16].to_vec();
        padded.extend_from_slice(b"2.50\x04\xff");
        assert!(parse_state(&padded, NOW).is_err());
    }

    #[test]
    fn options() {
        assert!(call::<QuotaArgs>("1 1 Clear").clear);
        assert_eq!(
            parse::<QuotaArgs>("1 1 KEEP"),
            Err(ArgError::UnknownOption(Command::Quota))
        );
        assert_eq!(
            parse::<QuotaArgs>("1"),
            Err(ArgError::Arity(Command::Quota))
        );
        let args = call::<QuotaArgs>("5 0.5 CLEAR");
        assert_eq!(
            Decides::words(&args),
            vec![Word::Number(5), Word::Text("0.5"), Word::Text("CLEAR")]
        );
        assert_eq!(
            args.decode(&[1, 2, 3]),
            Some(QuotaReply {
                changed: true,
                remaining: 2,
                reset_ms: 3
            })
        );
        assert_eq!(args.decode(&[2, 2, 3]), None);
    }
}

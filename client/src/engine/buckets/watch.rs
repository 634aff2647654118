//! How a reserved call of these buckets learns of a pause set while it sleeps: heard on the
//! process's subscription where the limiter listens and the subscription can be counted on,
//! otherwise asked, one `THROTTLE.PEEK` per bucket after the sleep.
//!
//! What is heard is a hint: anyone with publish rights on a channel can say anything on it.
//! Before a call heard to be covered drops its reservation and sleeps longer than it reserved,
//! the server confirms (one `THROTTLE.PEEK` per bucket per announcement, shared by every call
//! of the limiter that it covers); what the server does not confirm changes nothing.

use redis::aio::ConnectionLike;
use throttle_bucket::FULL_FACTOR_BP;
use tokio::time::Instant;

use super::slots::Slotted;
use super::Buckets;
use crate::engine::metrics::Event;
use crate::engine::waiting::{Covered, PauseWatch, Resume, Slept};
use crate::wire::listen::{Cover, Trust};
use crate::Error;

/// One call's watch over its buckets' pauses.
pub(super) struct Watch<'a, C> {
    buckets: &'a Buckets<C>,
    /// What the call could count on hearing when its last take was sent.
    trust: Option<Trust>,
}

impl<'a, C> Watch<'a, C> {
    pub(super) fn new(buckets: &'a Buckets<C>) -> Watch<'a, C> {
        Watch {
            buckets,
            trust: None,
        }
    }
}

/// What the server said of one bucket when asked to confirm an announcement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Said {
    /// When its pause ends (the PEEK's reply time plus the pause it named): no earlier than
    /// the server's end.
    pause_end: Instant,
    factor_bp: u16,
}

/// The server's word on the last announcement a call of the limiter had confirmed, per bucket
/// asked: the calls it covers share one `THROTTLE.PEEK` per bucket.
#[derive(Debug, Default)]
pub(super) struct Confirms {
    /// The announcement count it is for.
    count: Option<u64>,
    said: Vec<(usize, Said)>,
}

impl<C> PauseWatch<Slotted> for Watch<'_, C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    fn arm(&mut self) {
        self.trust = self
            .buckets
            .shared
            .ears
            .as_ref()
            .and_then(|ears| ears.trust());
    }

    async fn sleep(&mut self, reply: &Slotted, wake: Instant) -> Result<Slept, Error> {
        let ears = match (&self.buckets.shared.ears, self.trust) {
            (Some(ears), Some(_)) => ears,
            _ => {
                tokio::time::sleep_until(wake).await;
                return Ok(Slept::default());
            }
        };
        let tickets = &reply.taken.tickets;
        let mut slept = Slept::default();
        // The announcement the server last refuted: only a newer one wakes the call again.
        let mut after = None;
        loop {
            let cover = tokio::select! {
                biased;
                cover = ears.covered(tickets, wake, after) => cover,
                () = tokio::time::sleep_until(wake) => return Ok(slept),
            };
            let (said, trips) = self.buckets.confirm(&cover).await?;
            slept.trips = slept.trips.saturating_add(trips);
            match confirmed(&cover, &said, wake, Instant::now()) {
                Some(covered) => {
                    slept.covered = Some(covered);
                    return Ok(slept);
                }
                None => {
                    // Counted once per announcement: by the call that asked.
                    if trips > 0 {
                        self.buckets.shared.metrics.event(Event::Unconfirmed);
                    }
                    tracing::debug!(
                        limiter = %self.buckets.shared.name,
                        "an announcement heard is not confirmed by the server: the reserved \
                         call sleeps on"
                    );
                    after = Some(cover.count);
                }
            }
        }
    }

    async fn check(&mut self) -> Result<Option<(Resume, u32)>, Error> {
        let shared = &self.buckets.shared;
        if !shared.options.check_pause {
            return Ok(None);
        }
        let heard_all = match (&shared.ears, self.trust) {
            (Some(ears), Some(trust)) => ears.kept(trust),
            _ => false,
        };
        if heard_all {
            return Ok(None);
        }
        let buckets = u32::try_from(shared.buckets.len()).unwrap_or(u32::MAX);
        for _ in 0..buckets {
            shared.metrics.event(Event::PauseCheck);
        }
        let state = self.buckets.peek().await?;
        let resume = Resume {
            rest: state.paused_for,
            factor_bp: state.factor_bp,
        };
        Ok(Some((resume, buckets)))
    }
}

impl<C> Buckets<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// What the server says of each bucket `cover` names: asked once per announcement count
    /// and bucket, whichever call comes first (the others wait for its answer); with the round
    /// trips this call spent.
    async fn confirm(&self, cover: &Cover) -> Result<(Vec<(usize, Said)>, u32), Error> {
        let shared = &self.shared;
        let mut confirms = shared.confirms.lock().await;
        if confirms.count != Some(cover.count) {
            *confirms = Confirms {
                count: Some(cover.count),
                said: Vec::new(),
            };
        }
        let mut trips = 0u32;
        let mut said = Vec::with_capacity(cover.buckets.len());
        for heard in &cover.buckets {
            let known = confirms.said.iter().find(|(b, _)| *b == heard.bucket);
            let answer = match known {
                Some((_, answer)) => *answer,
                None => {
                    let Some(bucket) = shared.buckets.get(heard.bucket) else {
                        continue;
                    };
                    shared.metrics.event(Event::PauseConfirm);
                    let state = self.peek_one(bucket, 1).await?;
                    trips = trips.saturating_add(1);
                    let answer = Said {
                        pause_end: Instant::now() + state.paused_for,
                        factor_bp: state.factor_bp,
                    };
                    confirms.said.push((heard.bucket, answer));
                    answer
                }
            };
            said.push((heard.bucket, answer));
        }
        Ok((said, trips))
    }
}

/// Whether the server's word (`said`, per bucket) confirms what was heard (`cover`) for a
/// reservation usable at `wake`, at `now`: a bucket confirms a pause heard if its own pause
/// ends after `wake` (a reservation made after the pause was set is usable only after it
/// ends), and a cut heard if it is cut. The call then sleeps out the server's pause, not the
/// one heard, at the server's rate factor.
fn confirmed(
    cover: &Cover,
    said: &[(usize, Said)],
    wake: Instant,
    now: Instant,
) -> Option<Covered> {
    let mut resume: Option<Resume> = None;
    let mut moved = Vec::new();
    for heard in &cover.buckets {
        let Some((_, said)) = said.iter().find(|(b, _)| *b == heard.bucket) else {
            continue;
        };
        let paused = wake < said.pause_end;
        let cut = heard.cut && said.factor_bp < FULL_FACTOR_BP;
        if !(paused || cut) {
            continue;
        }
        if heard.moved {
            moved.push(heard.bucket);
        }
        let rest = said.pause_end.saturating_duration_since(now);
        resume = Some(match resume {
            None => Resume {
                rest,
                factor_bp: said.factor_bp,
            },
            Some(r) => Resume {
                rest: r.rest.max(rest),
                factor_bp: r.factor_bp.min(said.factor_bp),
            },
        });
    }
    Some(Covered {
        resume: resume?,
        moved,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::wire::listen::BucketCover;

    const MS: Duration = Duration::from_millis(1);

    fn heard(bucket: usize, end: Instant, cut: bool, moved: bool) -> BucketCover {
        BucketCover {
            bucket,
            end,
            cut,
            moved,
        }
    }

    fn said(bucket: usize, pause_end: Instant, factor_bp: u16) -> (usize, Said) {
        (
            bucket,
            Said {
                pause_end,
                factor_bp,
            },
        )
    }

    #[test]
    fn the_server_decides_what_a_heard_pause_does() {
        let now = Instant::now();
        let at = |ms: u64| now + MS * u32::try_from(ms).unwrap();
        // A reservation usable at 500 ms.
        let wake = at(500);
        let one = |h: BucketCover| Cover {
            count: 1,
            buckets: vec![h],
        };
        // (heard, the server's pause end and factor, the rest the call sleeps out, or none)
        let cases = [
            // An honest pause to 2 s: the server's end, not the one heard, is slept out.
            (
                heard(0, at(2_500), false, true),
                at(2_000),
                10_000,
                Some(2_000),
            ),
            // Heard to run a day, the server says 2 s: 2 s.
            (
                heard(0, at(86_400_000), false, true),
                at(2_000),
                10_000,
                Some(2_000),
            ),
            // Forged: no pause at the server (its end is now): nothing changes.
            (heard(0, at(86_400_000), false, true), now, 10_000, None),
            // A pause that ends before the reservation is usable does not cover it.
            (heard(0, at(400), false, false), at(400), 10_000, None),
            // A cut heard and cut at the server: taken again at once, at the server's factor.
            (heard(0, at(1), true, true), now, 5_000, Some(0)),
            // A forged cut: the server's rate is not cut.
            (heard(0, at(1), true, true), now, 10_000, None),
        ];
        for (h, end, factor, rest) in cases {
            let covered = confirmed(&one(h), &[said(0, end, factor)], wake, now);
            assert_eq!(
                covered.as_ref().map(|c| c.resume.rest),
                rest.map(|ms| MS * ms),
                "{h:?} against the server's end {:?}",
                end - now
            );
            if let Some(covered) = covered {
                assert_eq!(covered.resume.factor_bp, factor);
                assert_eq!(covered.moved, [0], "trusted only once confirmed");
            }
        }
    }

    #[test]
    fn several_buckets_each_confirm_their_own() {
        let now = Instant::now();
        let wake = now + MS * 500;
        let cover = Cover {
            count: 3,
            buckets: vec![
                heard(0, now + MS * 9_000, false, true),
                heard(1, now + MS * 1_000, false, true),
            ],
        };
        // Bucket 0 is not paused at the server (a forgery), bucket 1 is, to 1.2 s.
        let said = [said(0, now, 10_000), said(1, now + MS * 1_200, 10_000)];
        let covered = confirmed(&cover, &said, wake, now).expect("bucket 1 confirms");
        assert_eq!(covered.resume.rest, MS * 1_200);
        assert_eq!(
            covered.moved,
            [1],
            "bucket 0's give-back is still asked for"
        );
        // A bucket the server was not asked about (its PEEK not sent) confirms nothing.
        assert_eq!(confirmed(&cover, &[], wake, now), None);
    }
}

//! The partitions a process holds, spent locally: one GCRA per partition (the bucket crate's
//! arithmetic, time as an argument) and the instant its lease stops being usable. Pure: the
//! caller passes the monotonic clock in, in ns since an origin of its choice.

use throttle_bucket::{DebitArgs, GiveArgs, PeekArgs, Quota, State, TakeArgs, ThrottleCommand};

/// When a held partition may be spent, and how much of it is left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Held {
    pub index: u32,
    /// GCRA state: the instant the partition is full again.
    tat_ns: i64,
    /// Spend nothing from this instant on: the lease may have expired on the server.
    pub valid_until_ns: i64,
    /// When its lease was first confirmed (for the idle rule and the preference order).
    pub held_since_ns: i64,
    /// The last grant it served, or when it was acquired.
    pub last_used_ns: i64,
    /// Kept while the process runs, idle or not.
    pub reserved: bool,
}

impl Held {
    /// A partition just leased: **empty** at `start_ns`, which is after the server granted
    /// the lease (so after the previous holder's lease expired there). Its previous holders
    /// stopped spending before then, so within any window all holders together spend at most
    /// one burst plus the share's rate times the window.
    pub(super) fn new(
        quota: &Quota,
        index: u32,
        start_ns: i64,
        valid_until_ns: i64,
        reserved: bool,
    ) -> Held {
        Held {
            index,
            tat_ns: start_ns.saturating_add(quota.fill_ns()),
            valid_until_ns,
            held_since_ns: start_ns,
            last_used_ns: start_ns,
            reserved,
        }
    }
}

/// The outcome of [`Shares::take`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Take {
    /// Granted from this partition, whose state is now `tat_ns` with `remaining` whole
    /// tokens left.
    Granted {
        index: u32,
        tat_ns: i64,
        remaining: u64,
    },
    /// No held partition has the tokens now; the earliest one that will before its lease
    /// ends has them in this many ns (`None`: none will, a lease is needed).
    Wait { ns: Option<i64> },
}

/// The held partitions, in preference order: reserved first, then the longest held, so that
/// partitions leased for a burst of demand are the ones that go idle and are given up.
#[derive(Clone, Debug, Default)]
pub(crate) struct Shares {
    held: Vec<Held>,
    /// The supplier pushed back: no token before this instant, then no burst.
    paused_until_ns: i64,
}

impl Shares {
    pub(super) fn held(&self) -> &[Held] {
        &self.held
    }

    pub(super) fn len(&self) -> usize {
        self.held.len()
    }

    pub(super) fn holds(&self, index: u32) -> bool {
        self.held.iter().any(|h| h.index == index)
    }

    /// Adds a newly leased partition (replacing nothing: the caller checks [`Shares::holds`]).
    pub(super) fn add(&mut self, quota: &Quota, mut held: Held) {
        held.tat_ns = held.tat_ns.max(self.pause_state(quota));
        self.held.push(held);
        self.held
            .sort_by_key(|h| (!h.reserved, h.held_since_ns, h.index));
    }

    /// A confirmed renewal: spend until `valid_until_ns` (never moves it earlier).
    pub(super) fn extend(&mut self, index: u32, valid_until_ns: i64) {
        if let Some(h) = self.held.iter_mut().find(|h| h.index == index) {
            h.valid_until_ns = h.valid_until_ns.max(valid_until_ns);
        }
    }

    /// Stops spending a partition (lost, released or lapsed).
    pub(super) fn remove(&mut self, index: u32) -> Option<Held> {
        let at = self.held.iter().position(|h| h.index == index)?;
        Some(self.held.remove(at))
    }

    /// The supplier pushed back: no partition grants before `until_ns`, and each resumes
    /// from one token, no burst (THROTTLE.PAUSE's rule). Never shortens a longer pause.
    pub(super) fn pause(&mut self, quota: &Quota, until_ns: i64) {
        self.paused_until_ns = self.paused_until_ns.max(until_ns);
        let state = self.pause_state(quota);
        for h in &mut self.held {
            h.tat_ns = h.tat_ns.max(state);
        }
    }

    /// The GCRA state a pause imposes: the first token at the pause's end.
    fn pause_state(&self, quota: &Quota) -> i64 {
        let rest = i64::try_from(quota.capacity.saturating_sub(1))
            .unwrap_or(i64::MAX)
            .saturating_mul(quota.interval.ns());
        self.paused_until_ns.saturating_add(rest)
    }

    pub(super) fn paused_until_ns(&self) -> i64 {
        self.paused_until_ns
    }

    /// Drops every partition whose lease is no longer usable at `now_ns`.
    /// Returns them with the instant their lease stopped being usable.
    pub(super) fn drop_lapsed(&mut self, now_ns: i64) -> Vec<(u32, i64)> {
        let lapsed: Vec<(u32, i64)> = self
            .held
            .iter()
            .filter(|h| now_ns >= h.valid_until_ns)
            .map(|h| (h.index, h.valid_until_ns))
            .collect();
        self.held.retain(|h| now_ns < h.valid_until_ns);
        lapsed
    }

    /// Takes `tokens` (at least 1, at most the share's capacity) at `now_ns` from the first
    /// partition, in preference order, that has them now (leaving `floor` in it, for a bulk
    /// call) and whose lease is usable now.
    pub(super) fn take(
        &mut self,
        quota: &Quota,
        tokens: u64,
        floor: Option<u64>,
        now_ns: i64,
    ) -> Take {
        let args = TakeArgs {
            quota: *quota,
            tokens,
            max_wait_ms: 0,
            ticket: false,
            floor,
            inflight: None,
            line: None,
        };
        let mut soonest: Option<i64> = None;
        for h in &mut self.held {
            // The check every grant makes: a process that slept past its lease (SIGSTOP, a
            // long pause) spends nothing from it when it wakes.
            if now_ns >= h.valid_until_ns {
                continue;
            }
            let Some(outcome) = on_partition(&args, h.tat_ns, now_ns) else {
                continue;
            };
            match outcome.write.and_then(|w| w.tat()) {
                Some(tat) if outcome.granted => {
                    h.tat_ns = tat;
                    h.last_used_ns = now_ns;
                    return Take::Granted {
                        index: h.index,
                        tat_ns: tat,
                        remaining: outcome.remaining,
                    };
                }
                _ => {
                    let due = now_ns.saturating_add(outcome.wait_ns);
                    if due < h.valid_until_ns {
                        soonest = Some(soonest.map_or(outcome.wait_ns, |s| s.min(outcome.wait_ns)));
                    }
                }
            }
        }
        Take::Wait { ns: soonest }
    }

    /// Gives back `tokens` of a take from partition `index` that left its state at
    /// `tat_ns`, by THROTTLE.GIVE's rule: only while nothing was taken from it since (the
    /// state is still there), never beyond full. Returns the tokens given back.
    pub(super) fn give_back(
        &mut self,
        quota: &Quota,
        index: u32,
        tokens: u64,
        tat_ns: i64,
        now_ns: i64,
    ) -> u64 {
        let Some(h) = self.held.iter_mut().find(|h| h.index == index) else {
            return 0;
        };
        let args = GiveArgs {
            quota: *quota,
            tokens,
            ticket_us: u64::try_from(tat_ns.div_euclid(1000)).unwrap_or(0),
        };
        let Some(outcome) = on_partition(&args, h.tat_ns, now_ns) else {
            return 0;
        };
        if let Some(write) = outcome.write {
            // A delete is a full bucket: its state is now.
            h.tat_ns = write.tat().unwrap_or(now_ns);
        }
        outcome.reply
    }

    /// Takes `tokens` more at `now_ns`, into debt if need be (THROTTLE.DEBIT's rule), from
    /// partition `index`, or, if this process no longer holds it, from the first partition it
    /// holds. Returns the tokens taken (0 when it holds none: the extra leaves with the lease;
    /// or when the debt would pass THROTTLE.DEBIT's limit).
    pub(super) fn debit(&mut self, quota: &Quota, index: u32, tokens: u64, now_ns: i64) -> u64 {
        let at = self.held.iter().position(|h| h.index == index).unwrap_or(0);
        let Some(h) = self.held.get_mut(at) else {
            return 0;
        };
        let args = DebitArgs {
            quota: *quota,
            tokens,
        };
        // Refused only past 20 years of debt: then nothing more is taken.
        let write = on_partition(&args, h.tat_ns, now_ns).and_then(|outcome| outcome.write);
        match write.and_then(|w| w.tat()) {
            Some(tat) => {
                h.tat_ns = tat;
                tokens
            }
            None => 0,
        }
    }

    /// The usable partitions at `now_ns`: whole tokens in them together, and the longest
    /// until one is full again (ms, rounded up, as THROTTLE.PEEK replies).
    pub(super) fn view(&self, quota: &Quota, now_ns: i64) -> (u64, u64) {
        self.held
            .iter()
            .filter(|h| now_ns < h.valid_until_ns)
            .filter_map(|h| on_partition(&PeekArgs { quota: *quota }, h.tat_ns, now_ns))
            .fold((0, 0), |(remaining, full), seen| {
                (
                    remaining.saturating_add(seen.reply.remaining),
                    full.max(seen.reply.reset_ms),
                )
            })
    }
}

/// The command `call` on a partition whose state is `tat_ns` (a partition is a plain bucket),
/// by the module's own arithmetic; `None` where the command refuses (THROTTLE.DEBIT past its
/// debt limit).
fn on_partition<A: ThrottleCommand>(call: &A, tat_ns: i64, now_ns: i64) -> Option<A::Outcome> {
    call.apply(&[Some(State::plain(tat_ns))], now_ns).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// 2 tokens, one per 100 ms.
    fn quota() -> Quota {
        TakeArgs::parse(&[b"2", b"10"]).unwrap().quota
    }

    fn granted(take: Take) -> u32 {
        match take {
            Take::Granted { index, .. } => index,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_debit_goes_into_debt_on_the_partition_that_served_or_the_first_held() {
        let q = quota();
        let mut shares = Shares::default();
        shares.add(&q, Held::new(&q, 4, 0, 10_000 * MS, false));
        shares.add(&q, Held::new(&q, 7, 0, 10_000 * MS, false));
        // Both start empty (full at 200 ms); at 1 s both are full.
        assert_eq!(shares.debit(&q, 7, 3, 1_000 * MS), 3);
        // Partition 7 owes 3 tokens: 100 ms beyond now (3 taken from 2).
        assert_eq!(shares.view(&q, 1_000 * MS), (2, 300));
        assert_eq!(
            shares.debit(&q, 9, 1, 1_000 * MS),
            1,
            "not held: the first held pays"
        );
        assert_eq!(Shares::default().debit(&q, 4, 1, 0), 0);
    }

    #[test]
    fn a_new_partition_starts_empty() {
        let q = quota();
        let mut shares = Shares::default();
        shares.add(&q, Held::new(&q, 3, 1000 * MS, 3000 * MS, false));
        // Nothing at the start, the first token one interval later, then one per interval.
        assert_eq!(
            shares.take(&q, 1, None, 1000 * MS),
            Take::Wait { ns: Some(100 * MS) }
        );
        assert_eq!(
            shares.take(&q, 1, None, 1099 * MS),
            Take::Wait { ns: Some(MS) }
        );
        assert_eq!(granted(shares.take(&q, 1, None, 1100 * MS)), 3);
        assert_eq!(
            shares.take(&q, 1, None, 1100 * MS),
            Take::Wait { ns: Some(100 * MS) }
        );
        // Idle for a second: the burst (2) is there, no more.
        assert_eq!(granted(shares.take(&q, 1, None, 2100 * MS)), 3);
        assert_eq!(granted(shares.take(&q, 1, None, 2100 * MS)), 3);
        assert!(matches!(
            shares.take(&q, 1, None, 2100 * MS),
            Take::Wait { .. }
        ));
    }

    #[test]
    fn nothing_is_spent_at_or_after_the_lease_ends() {
        let q = quota();
        let mut shares = Shares::default();
        shares.add(&q, Held::new(&q, 0, 0, 500 * MS, false));
        // Full by 200 ms, but woken at 500 ms (a process frozen meanwhile): nothing.
        assert_eq!(shares.take(&q, 1, None, 500 * MS), Take::Wait { ns: None });
        assert_eq!(
            shares.take(&q, 1, None, 10_000 * MS),
            Take::Wait { ns: None }
        );
        // A token due after the lease ends is not promised either.
        let mut shares = Shares::default();
        shares.add(&q, Held::new(&q, 0, 0, 450 * MS, false));
        assert_eq!(granted(shares.take(&q, 1, None, 449 * MS)), 0);
        assert_eq!(granted(shares.take(&q, 1, None, 449 * MS)), 0);
        assert_eq!(shares.take(&q, 1, None, 449 * MS), Take::Wait { ns: None });
        // A renewal extends it.
        shares.extend(0, 2000 * MS);
        shares.extend(0, 1000 * MS);
        assert_eq!(shares.held()[0].valid_until_ns, 2000 * MS);
        assert_eq!(
            shares.take(&q, 1, None, 449 * MS),
            Take::Wait { ns: Some(100 * MS) }
        );
        assert_eq!(shares.drop_lapsed(1999 * MS), Vec::new());
        assert_eq!(shares.drop_lapsed(2000 * MS), vec![(0, 2000 * MS)]);
        assert_eq!(shares.len(), 0);
    }

    #[test]
    fn reserved_then_oldest_partitions_serve_first() {
        let q = quota();
        let mut shares = Shares::default();
        shares.add(&q, Held::new(&q, 7, 0, 10_000 * MS, false));
        shares.add(&q, Held::new(&q, 2, 50 * MS, 10_000 * MS, false));
        shares.add(&q, Held::new(&q, 9, 100 * MS, 10_000 * MS, true));
        let order: Vec<u32> = shares.held().iter().map(|h| h.index).collect();
        assert_eq!(order, [9, 7, 2]);
        // At 1 s all are full: 9 serves first, then 7, then 2.
        let served: Vec<u32> = (0..6)
            .map(|_| granted(shares.take(&q, 1, None, 1000 * MS)))
            .collect();
        assert_eq!(served, [9, 9, 7, 7, 2, 2]);
        assert!(shares.remove(7).is_some());
        assert!(!shares.holds(7) && shares.holds(2));
    }

    #[test]
    fn a_pause_stops_every_partition_then_resumes_without_burst() {
        let q = quota();
        let mut shares = Shares::default();
        shares.add(&q, Held::new(&q, 0, 0, 10_000 * MS, false));
        shares.add(&q, Held::new(&q, 1, 0, 10_000 * MS, false));
        // Both full at 1 s; the supplier says: nothing for 500 ms.
        shares.pause(&q, 1500 * MS);
        shares.pause(&q, 1200 * MS); // never shortens it
        assert_eq!(
            shares.take(&q, 1, None, 1000 * MS),
            Take::Wait { ns: Some(500 * MS) }
        );
        assert_eq!(granted(shares.take(&q, 1, None, 1500 * MS)), 0);
        assert_eq!(granted(shares.take(&q, 1, None, 1500 * MS)), 1);
        assert!(matches!(
            shares.take(&q, 1, None, 1500 * MS),
            Take::Wait { .. }
        ));
        // A partition leased during the pause obeys it too.
        shares.add(&q, Held::new(&q, 2, 1100 * MS, 10_000 * MS, false));
        assert_eq!(shares.held().len(), 3);
        assert_eq!(granted(shares.take(&q, 1, None, 1600 * MS)), 0);
        assert_eq!(granted(shares.take(&q, 1, None, 1600 * MS)), 1);
        assert_eq!(granted(shares.take(&q, 1, None, 1600 * MS)), 2);
        assert_eq!(shares.paused_until_ns(), 1500 * MS);
    }

    #[test]
    fn successive_holders_never_exceed_one_burst_plus_rate() {
        // Holder A: leased at 0 (empty), spends greedily until its lease ends at 1 s. Holder
        // B: leases once the server's lease expired (1.2 s), empty, spends greedily. Every
        // window of the combined grants holds at most burst + rate x window.
        let q = quota();
        let mut grants = Vec::new();
        for (start, end) in [(0, 1000 * MS), (1200 * MS, 3000 * MS)] {
            let mut shares = Shares::default();
            shares.add(&q, Held::new(&q, 0, start, end, false));
            let mut now = start;
            while now < end {
                match shares.take(&q, 1, None, now) {
                    Take::Granted { .. } => grants.push(now),
                    Take::Wait { ns: Some(ns) } => now += ns,
                    Take::Wait { ns: None } => break,
                }
            }
        }
        for (i, &a) in grants.iter().enumerate() {
            for (j, &b) in grants.iter().enumerate().skip(i) {
                let allowed = 2 + (b - a) / (100 * MS);
                assert!((j - i + 1) as i64 <= allowed, "{grants:?}");
            }
        }
        // A: 100..900 ms (9); B: 1300..2900 ms (17).
        assert_eq!(grants.len(), 9 + 17);
    }
}

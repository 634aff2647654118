//! How many partitions to hold, and how long a lease may be spent: pure decisions, taking the
//! monotonic clock (ns) and the limiter's state as arguments. The lease I/O is in `lease`,
//! the task that acts on these decisions in `keeper`.

use std::time::Duration;

/// How far a lease may be trusted, and when to renew it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Timing {
    pub lease_ns: i64,
    /// Fraction of the lease lost to a local clock that runs slow against the servers'.
    pub clock_rate_margin: f64,
    /// Taken off every lease: the servers' ms clocks rounding down, clock offsets between a
    /// master and the replica that takes over.
    pub fixed_margin_ns: i64,
    /// Renew a lease once this much of it has passed since its last confirmation.
    pub renew_after_ns: i64,
}

impl Timing {
    /// The last instant a lease confirmed by a write **sent** at `sent_ns` may be spent. The
    /// server set its expiry to at least `sent + lease` in real time (it ran the write after
    /// we sent it); our clock may run slow by the rate margin, and the fixed margin covers
    /// rounding and clock offsets.
    pub(super) fn valid_until(&self, sent_ns: i64) -> i64 {
        let usable = (self.lease_ns as f64 * (1.0 - self.clock_rate_margin)) as i64;
        sent_ns
            .saturating_add(usable)
            .saturating_sub(self.fixed_margin_ns)
    }

    /// Whether a lease confirmed by a write sent at `confirmed_sent_ns` is due for renewal.
    pub(super) fn renew_due(&self, confirmed_sent_ns: i64, now_ns: i64) -> bool {
        now_ns.saturating_sub(confirmed_sent_ns) >= self.renew_after_ns
    }

    /// Checks that a lease leaves time to spend after its renewal is due.
    pub(super) fn check(&self, wait_timeout: Duration) -> Result<(), String> {
        let usable = self.valid_until(0);
        let timeout = i64::try_from(wait_timeout.as_nanos()).unwrap_or(i64::MAX);
        if !(0.0..0.5).contains(&self.clock_rate_margin) {
            return Err(format!(
                "a clock rate margin of {} is out of range: use 0 to 0.5 (0.01 is 1 %)",
                self.clock_rate_margin
            ));
        }
        if usable <= self.renew_after_ns.saturating_add(timeout) {
            return Err(format!(
                "a lease of {:?} leaves {:?} to spend after the margins, not more than the \
                 renewal point ({:?}) plus the replica wait ({wait_timeout:?}): lengthen the \
                 lease or shrink the margins",
                Duration::from_nanos(self.lease_ns.max(0) as u64),
                Duration::from_nanos(usable.max(0) as u64),
                Duration::from_nanos(self.renew_after_ns.max(0) as u64),
            ));
        }
        Ok(())
    }
}

/// The demand rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rules {
    pub reserved: usize,
    pub max_held: usize,
    /// Lease another partition once a waiter has waited this long.
    pub grow_after_ns: i64,
    /// Give up a partition (not a reserved one) unused this long, when nobody waits.
    pub idle_after_ns: i64,
    /// After yielding a partition to another process, take none for this long.
    pub yield_cooldown_ns: i64,
}

/// What the limiter looks like to the rules at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Situation {
    pub held: usize,
    /// Calls waiting for tokens now.
    pub waiters: usize,
    /// How long the longest of them has waited.
    pub longest_wait_ns: i64,
    /// Non-reserved partitions with the time since they last served a grant, in preference
    /// order (the last is the first to go).
    pub idle_ns: Vec<(u32, i64)>,
    /// Another process asked for partitions, holding this many.
    pub other_wants: Option<usize>,
    /// Since this process last yielded a partition (`None`: never).
    pub since_yield_ns: Option<i64>,
}

/// What to do now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Partitions to lease more.
    pub acquire: usize,
    /// Partitions to give up now.
    pub release: Vec<u32>,
    /// Give this one up to a process that holds fewer and waits.
    pub yield_one: Option<u32>,
}

/// Decides how many partitions to hold: the reserved ones always; more, growing by half
/// again, while calls wait longer than `grow_after`; fewer when partitions idle and nobody
/// waits; one fewer when another process that holds at least two fewer asks for one.
pub(crate) fn plan(rules: &Rules, s: &Situation) -> Plan {
    let mut plan = Plan::default();
    let cooling = s
        .since_yield_ns
        .is_some_and(|since| since < rules.yield_cooldown_ns);
    let starving = s.waiters > 0 && (s.held == 0 || s.longest_wait_ns >= rules.grow_after_ns);
    let floor = rules.reserved.min(rules.max_held);
    let mut target = s.held.max(floor);
    if starving && !cooling {
        target = target.max(s.held + (s.held / 2).max(1));
    } else if starving && s.held == 0 {
        // Even while cooling down, a process with calls waiting keeps one partition.
        target = target.max(1);
    }
    target = target.min(rules.max_held.max(floor));
    plan.acquire = target.saturating_sub(s.held);

    if s.waiters == 0 {
        let spare = s.held.saturating_sub(floor);
        plan.release = s
            .idle_ns
            .iter()
            .rev()
            .filter(|(_, idle)| *idle >= rules.idle_after_ns)
            .take(spare)
            .map(|(index, _)| *index)
            .collect();
    }
    let left = s.held - plan.release.len();
    if let Some(theirs) = s.other_wants {
        if plan.acquire == 0 && left >= theirs + 2 && left > floor.max(1) {
            plan.yield_one = s
                .idle_ns
                .iter()
                .rev()
                .map(|(index, _)| *index)
                .find(|index| !plan.release.contains(index));
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn rules() -> Rules {
        Rules {
            reserved: 1,
            max_held: 8,
            grow_after_ns: 20 * MS,
            idle_after_ns: 1000 * MS,
            yield_cooldown_ns: 2000 * MS,
        }
    }

    fn timing() -> Timing {
        Timing {
            lease_ns: 2000 * MS,
            clock_rate_margin: 0.01,
            fixed_margin_ns: 10 * MS,
            renew_after_ns: 666 * MS,
        }
    }

    #[test]
    fn a_lease_is_spent_only_within_its_margins() {
        let t = timing();
        // Sent at 5 s: the server's expiry is at least 7 s; spend until 7 s - 20 ms - 10 ms.
        assert_eq!(t.valid_until(5000 * MS), 6970 * MS);
        assert!(!t.renew_due(5000 * MS, 5665 * MS));
        assert!(t.renew_due(5000 * MS, 5666 * MS));
        assert_eq!(t.check(Duration::from_millis(100)), Ok(()));
        let short = Timing {
            lease_ns: 700 * MS,
            ..t
        };
        let err = short.check(Duration::from_millis(100)).unwrap_err();
        assert!(err.contains("lengthen the lease"), "{err}");
        let odd = Timing {
            clock_rate_margin: 0.7,
            ..t
        };
        assert!(odd.check(Duration::ZERO).unwrap_err().contains("0 to 0.5"));
    }

    #[test]
    fn reserved_partitions_come_first_and_stay() {
        let r = rules();
        let idle = Situation {
            held: 0,
            ..Situation::default()
        };
        assert_eq!(plan(&r, &idle).acquire, 1);
        // Held and idle for an hour: the reserved one is kept.
        let s = Situation {
            held: 1,
            idle_ns: vec![],
            ..Situation::default()
        };
        assert_eq!(plan(&r, &s), Plan::default());
    }

    #[test]
    fn waiting_calls_grow_the_lease_by_half_again() {
        let r = rules();
        let mut s = Situation {
            held: 1,
            waiters: 3,
            longest_wait_ns: 19 * MS,
            ..Situation::default()
        };
        assert_eq!(plan(&r, &s).acquire, 0, "not waited long enough");
        s.longest_wait_ns = 20 * MS;
        assert_eq!(plan(&r, &s).acquire, 1);
        s.held = 4;
        assert_eq!(plan(&r, &s).acquire, 2);
        s.held = 7;
        assert_eq!(plan(&r, &s).acquire, 1, "capped at max_held");
        s.held = 8;
        assert_eq!(plan(&r, &s).acquire, 0);
        // Nothing held: lease one at once, whatever the wait.
        let none = Situation {
            held: 0,
            waiters: 1,
            ..Situation::default()
        };
        let no_reserve = Rules { reserved: 0, ..r };
        assert_eq!(plan(&no_reserve, &none).acquire, 1);
    }

    #[test]
    fn idle_partitions_are_given_up_last_leased_first() {
        let r = rules();
        let mut s = Situation {
            held: 4,
            idle_ns: vec![(5, 3000 * MS), (6, 999 * MS), (7, 1500 * MS)],
            ..Situation::default()
        };
        assert_eq!(plan(&r, &s).release, vec![7, 5]);
        // Nothing goes while a call waits.
        s.waiters = 1;
        assert_eq!(plan(&r, &s).release, Vec::<u32>::new());
    }

    #[test]
    fn a_partition_goes_to_a_process_that_holds_two_fewer() {
        let r = rules();
        let mut s = Situation {
            held: 4,
            waiters: 2,
            longest_wait_ns: 5 * MS,
            idle_ns: vec![(5, 0), (6, 0), (7, 0)],
            other_wants: Some(2),
            ..Situation::default()
        };
        assert_eq!(plan(&r, &s).yield_one, Some(7));
        s.other_wants = Some(3);
        assert_eq!(plan(&r, &s).yield_one, None, "3 vs 4 is fair enough");
        // A process that is itself growing does not yield.
        s.other_wants = Some(0);
        s.longest_wait_ns = 50 * MS;
        assert_eq!(plan(&r, &s).acquire, 2);
        assert_eq!(plan(&r, &s).yield_one, None);
        // Having yielded, it does not grow again during the cooldown, but yields again.
        s.since_yield_ns = Some(100 * MS);
        assert_eq!(plan(&r, &s).acquire, 0);
        assert_eq!(plan(&r, &s).yield_one, Some(7));
        s.since_yield_ns = Some(2000 * MS);
        assert_eq!(plan(&r, &s).acquire, 2);
    }
}

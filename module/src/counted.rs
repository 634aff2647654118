//! What each command counts in `INFO throttle`: all that the module's handler does
//! differently per command (`handler` is written once over `ThrottleCommand`).

use throttle_bucket::commands::{
    Cut, Debit, Give, MTake, Pause, Peek, Release, Renew, Slots, Take,
};
use throttle_bucket::ThrottleCommand;

use crate::stats;

/// A command the module serves: its counters, after the call (`stats::called` counts every
/// call, and `stats::error` every error, before this).
pub(crate) trait Counted: ThrottleCommand {
    /// Counts the call `args` that decided `outcome`.
    fn count(args: &Self::Args, outcome: &Self::Outcome);
}

impl Counted for Take {
    fn count(args: &Self::Args, outcome: &Self::Outcome) {
        // A take of 0 only inspects.
        if args.tokens > 0 {
            if outcome.granted {
                stats::granted(outcome.wait_ns > 0);
            } else {
                stats::denied(outcome.held_by_floor);
                if outcome.held_by_slots {
                    stats::held_by_slots();
                }
            }
        } else if args.inflight.is_some() {
            // A take of 0 with INFLIGHT takes a slot: granted or denied like any take.
            if outcome.granted {
                stats::granted(false);
            } else {
                stats::denied(false);
                if outcome.held_by_slots {
                    stats::held_by_slots();
                }
            }
        }
    }
}

impl Counted for MTake {
    fn count(args: &Self::Args, outcome: &Self::Outcome) {
        // A call of 0 tokens only inspects, unless it takes a slot (INFLIGHT): then it is
        // granted or denied like any take, as THROTTLE.TAKE's.
        if args.limits().iter().any(|l| l.tokens > 0) || args.inflight.is_some() {
            if outcome.granted {
                stats::granted(outcome.wait_ns > 0);
            } else {
                stats::denied(outcome.held_by_floor);
                if outcome.held_by_slots {
                    stats::held_by_slots();
                }
            }
        }
    }
}

impl Counted for Pause {
    fn count(_args: &Self::Args, _outcome: &Self::Outcome) {
        // Also a pause that changed nothing, since a longer one was on.
        stats::paused();
    }
}

impl Counted for Give {
    fn count(_args: &Self::Args, outcome: &Self::Outcome) {
        stats::given_back(outcome.given);
    }
}

impl Counted for Peek {
    fn count(_args: &Self::Args, _outcome: &Self::Outcome) {}
}

impl Counted for Cut {
    fn count(_args: &Self::Args, outcome: &Self::Outcome) {
        stats::cut(outcome.cut);
    }
}

impl Counted for throttle_bucket::commands::Sync {
    fn count(_args: &Self::Args, outcome: &Self::Outcome) {
        stats::synced(outcome.write.is_some());
    }
}

impl Counted for Debit {
    fn count(args: &Self::Args, _outcome: &Self::Outcome) {
        stats::debited(args.tokens);
    }
}

impl Counted for Renew {
    fn count(_args: &Self::Args, outcome: &Self::Outcome) {
        stats::renewed(outcome.held);
    }
}

impl Counted for Release {
    fn count(_args: &Self::Args, outcome: &Self::Outcome) {
        stats::released(outcome.held);
    }
}

impl Counted for Slots {
    fn count(_args: &Self::Args, _outcome: &Self::Outcome) {}
}

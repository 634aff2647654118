//! What each command counts in `INFO throttle`: all that the module's handler does
//! differently per command (`handler` is written once over `ThrottleCommand`).

use throttle_bucket::{
    CutArgs, DebitArgs, GiveArgs, MTakeArgs, PauseArgs, PeekArgs, QuotaArgs, ReleaseArgs,
    RenewArgs, ResumeArgs, SlotsArgs, SyncArgs, TakeArgs, ThrottleCommand,
};

use crate::stats;

/// A command the module serves: its counters, after the call (`stats::called` counts every
/// call, and `stats::error` every error, before this).
pub(crate) trait Counted: ThrottleCommand {
    /// Counts this call, which decided `outcome`.
    fn count(&self, outcome: &Self::Outcome);
}

impl Counted for TakeArgs {
    fn count(&self, outcome: &Self::Outcome) {
        let line = outcome.line;
        stats::line(line.joined, line.handed, line.left);
        // A take of 0 only inspects.
        if self.tokens > 0 {
            if outcome.granted {
                stats::granted(outcome.wait_ns > 0);
            } else {
                stats::denied(outcome.held_by_floor);
                if outcome.held_by_slots {
                    stats::held_by_slots();
                }
            }
        } else if self.inflight.is_some() {
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

impl Counted for MTakeArgs {
    fn count(&self, outcome: &Self::Outcome) {
        let line = outcome.line;
        stats::line(line.joined, line.handed, line.left);
        // A call of 0 tokens only inspects, unless it takes a slot (INFLIGHT): then it is
        // granted or denied like any take, as THROTTLE.TAKE's.
        if self.limits().iter().any(|l| l.tokens > 0) || self.inflight.is_some() {
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

impl Counted for PauseArgs {
    fn count(&self, _outcome: &Self::Outcome) {
        // Also a pause that changed nothing, since a longer one was on.
        stats::paused();
    }
}

impl Counted for GiveArgs {
    fn count(&self, outcome: &Self::Outcome) {
        stats::given_back(outcome.reply);
    }
}

impl Counted for PeekArgs {
    fn count(&self, _outcome: &Self::Outcome) {}
}

impl Counted for CutArgs {
    fn count(&self, outcome: &Self::Outcome) {
        stats::cut(outcome.reply.cut);
    }
}

impl Counted for SyncArgs {
    fn count(&self, outcome: &Self::Outcome) {
        stats::synced(outcome.write.is_some());
    }
}

impl Counted for DebitArgs {
    fn count(&self, _outcome: &Self::Outcome) {
        stats::debited(self.tokens);
    }
}

impl Counted for RenewArgs {
    fn count(&self, outcome: &Self::Outcome) {
        stats::renewed(outcome.held);
    }
}

impl Counted for ReleaseArgs {
    fn count(&self, outcome: &Self::Outcome) {
        stats::released(outcome.held);
        stats::line(false, outcome.handed.len() as u64, outcome.left);
    }
}

impl Counted for SlotsArgs {
    fn count(&self, _outcome: &Self::Outcome) {}
}

/// Counted by its `calls_quota` alone: an operator's act.
impl Counted for QuotaArgs {
    fn count(&self, _outcome: &Self::Outcome) {}
}

impl Counted for ResumeArgs {
    fn count(&self, outcome: &Self::Outcome) {
        stats::resumed(outcome.reply);
    }
}

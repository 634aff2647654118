//! What each command counts in `INFO throttle`: all that the module's handler does
//! differently per command (`handler` is written once over `ThrottleCommand`).

use throttle_bucket::{
    CutArgs, DebitArgs, GiveArgs, LineCounts, MTakeArgs, PauseArgs, PeekArgs, QuotaArgs,
    ReleaseArgs, RenewArgs, ResumeArgs, SlotsArgs, SyncArgs, TakeArgs, ThrottleCommand,
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
        // A take of 0 only inspects, unless it takes a slot (INFLIGHT): then it is granted or
        // denied like any take, never after a wait or by a floor.
        let taking = self.tokens > 0;
        taken(
            outcome.line,
            (taking || self.inflight.is_some()).then_some(outcome.granted),
            taking && outcome.wait_ns > 0,
            taking && outcome.held_by_floor,
            outcome.held_by_slots,
        );
    }
}

impl Counted for MTakeArgs {
    fn count(&self, outcome: &Self::Outcome) {
        // As THROTTLE.TAKE's, with every key's tokens.
        let taking = self.limits().iter().any(|l| l.tokens > 0);
        taken(
            outcome.line,
            (taking || self.inflight.is_some()).then_some(outcome.granted),
            outcome.wait_ns > 0,
            outcome.held_by_floor,
            outcome.held_by_slots,
        );
    }
}

/// A THROTTLE.TAKE's or MTAKE's counts: its moves in the line, and, unless it only inspected
/// (`granted` is `None`), its grant (after a wait or not) or its denial (by a floor or not;
/// for want of a slot or not).
fn taken(
    line: LineCounts,
    granted: Option<bool>,
    waited: bool,
    held_by_floor: bool,
    held_by_slots: bool,
) {
    stats::line(line.joined, line.handed, line.left);
    match granted {
        None => {}
        Some(true) => stats::granted(waited),
        Some(false) => {
            stats::denied(held_by_floor);
            if held_by_slots {
                stats::held_by_slots();
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
        stats::renewed(outcome.reply);
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

//! What one call asks of a limiter: how many tokens, how long it may wait, and whether it
//! must leave a floor for the interactive calls.

use std::time::Duration;

/// Which calls come first when several workflows share one quota (a bulk load beside
/// interactive queries).
///
/// ```
/// use redis_throttle::{Demand, Priority};
///
/// // A bulk import keeps 20 tokens for the interactive calls.
/// let bulk = Demand::call().priority(Priority::Bulk { floor: 20 });
/// assert_eq!(bulk.priority, Priority::Bulk { floor: 20 });
/// assert_eq!(Demand::call().priority, Priority::Interactive);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Priority {
    /// Takes from the whole bucket and waits as the limiter's strategy says (the default).
    #[default]
    Interactive,
    /// Takes only while `floor` tokens stay in the bucket after the take, so interactive
    /// calls always find them there, and uses everything above it (all of the refill while
    /// they are idle). Never reserves ahead: it waits client-side for the instant the server
    /// names, then takes. In each bucket of a [`MultiLimiter`](crate::MultiLimiter); scaled to
    /// one partition's share for a
    /// [`PartitionedLimiter`](crate::partitioned::PartitionedLimiter). A floor above what a
    /// bucket can keep (its capacity less the call's tokens) is lowered to that.
    Bulk {
        /// Tokens that must remain after the take.
        floor: u64,
    },
}

/// One call's demand: its tokens, its deadline and its priority.
///
/// `acquire()` is `acquire_with(Demand::call())`; five tokens within `d` are
/// `acquire_with(Demand::tokens(5).within(d))`.
///
/// ```
/// use std::time::Duration;
/// use redis_throttle::{Demand, Priority};
///
/// let demand = Demand::tokens(5)
///     .within(Duration::from_millis(200))
///     .priority(Priority::Bulk { floor: 2 });
/// assert_eq!(demand.tokens, Some(5));
/// assert_eq!(demand.deadline, Some(Duration::from_millis(200)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Demand {
    /// Tokens to take; `None`: the limiter's cost per call.
    pub tokens: Option<u64>,
    /// The longest the call may wait; `None`: as long as it takes.
    pub deadline: Option<Duration>,
    /// Interactive, or bulk with a floor.
    pub priority: Priority,
}

impl Demand {
    /// One call's worth: the limiter's cost, no deadline, interactive.
    pub fn call() -> Demand {
        Demand::default()
    }

    /// `tokens` tokens, no deadline, interactive.
    pub fn tokens(tokens: u64) -> Demand {
        Demand {
            tokens: Some(tokens),
            ..Demand::default()
        }
    }

    /// Fails at once, taking nothing, if the tokens will not be there within `deadline`.
    pub fn within(self, deadline: Duration) -> Demand {
        Demand {
            deadline: Some(deadline),
            ..self
        }
    }

    /// At this priority.
    pub fn priority(self, priority: Priority) -> Demand {
        Demand { priority, ..self }
    }
}

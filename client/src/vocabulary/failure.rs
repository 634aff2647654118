//! What a call does when it cannot be served as asked: how long it waits at most unless it
//! says, and what it does while Redis cannot be reached.

use std::time::Duration;

#[cfg(doc)]
use crate::{Error, Grant};

/// How long a call waits for its tokens unless its [`Demand`](crate::Demand) says
/// ([`Demand::within`](crate::Demand::within)): a minute. A call that would wait
/// longer fails at once with [`Error::DeadlineExceeded`], taking nothing, so that under
/// overload the callers learn it instead of queueing without bound. Set another with the
/// builders' `max_wait` (`Duration::MAX`: as long as the bucket needs, up to the server's 10
/// years).
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(60);

/// What a limiter does with a call while Redis cannot be reached (the connection refused,
/// reset or dropped, no route to it): fail the call (the default), or let it through
/// unthrottled. A server that is slow to answer (a timeout) is reachable: its calls fail,
/// whatever the choice, so that another user's long script cannot open the limiter.
///
/// Failing closed keeps the supplier's quota whatever happens, at the price of the calls
/// while Redis is down. Failing open keeps the calls going, at the risk of going over the
/// quota meanwhile (the supplier's 429s then still reach the HTTP layers); each call let
/// through is counted ([`MetricsSnapshot::failed_open`](crate::MetricsSnapshot::failed_open))
/// and logged (a warning at the 1st, 2nd, 4th, 8th, ... such call). Only Redis being
/// unreachable lets a call through: a missing module, a bad quota or a refused command fail
/// as always.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unreachable {
    /// The call fails with [`Error::Connection`].
    #[default]
    FailClosed,
    /// The call is granted without the bucket: a [`Grant`] with `unchecked` set, nothing to
    /// give back.
    FailOpen,
}

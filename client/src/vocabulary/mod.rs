//! The vocabulary: the words every limiter is spoken to and answers with. A quota, what a call
//! asks ([`Demand`](crate::Demand)) and holds once granted ([`Grant`](crate::Grant)), a bucket
//! as it stands, the supplier's pushback, what can go wrong and what a call does then, the
//! counters a limiter tells of itself, where its commands run ([`Backend`](crate::Backend)),
//! and the [`Throttle`](crate::Throttle) trait that says them all (with
//! [`Prioritized`](crate::Prioritized), which says them at one priority).
//!
//! No I/O and no live state. It imports nothing of the engine (`crate::engine`), of the wire
//! (`crate::wire`) or of the layers above them, only its own words and `throttle_bucket`'s
//! definitions; the one exception is `error`'s messages, which name the function library's
//! version (`crate::script::LIBRARY_VERSION`). Every layer may import it.

pub(crate) mod backend;
pub(crate) mod bucket_state;
pub(crate) mod demand;
pub(crate) mod error;
pub(crate) mod failure;
pub(crate) mod grant;
pub(crate) mod metrics;
pub(crate) mod prioritized;
pub(crate) mod pushback;
pub(crate) mod quota;
pub(crate) mod throttle;

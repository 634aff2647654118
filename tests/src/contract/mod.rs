//! Contract tests: each scenario written once, generic over the limiter (anything that
//! implements `Throttle`), and run by every limiter's test file with one line that says how
//! to build it and what the code decides for it (exact numbers, not bounds).

pub mod in_flight;
pub mod in_flight_paused;

use redis_throttle::Throttle;

/// A limiter the scenarios can share between tasks (cloned into them).
pub trait Capable: Throttle + Clone + Send + Sync + 'static {}
impl<T: Throttle + Clone + Send + Sync + 'static> Capable for T {}

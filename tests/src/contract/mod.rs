//! Contract tests: each scenario written once, generic over the limiter (anything that
//! implements `Throttle`), and run by every limiter's test file with one line that says how
//! to build it and what the code decides for it (exact numbers, not bounds).

pub mod in_flight;
pub mod in_flight_paused;

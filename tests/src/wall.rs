//! The wall clock every process on the machine and the servers share, in ns since the Unix
//! epoch (`i128`): how worker processes time their start and log their grants.

use std::time::Duration;

pub const NS_PER_MS: i128 = 1_000_000;
pub const NS_PER_S: i128 = 1_000_000_000;

/// Now, in ns since the Unix epoch.
pub fn now_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_nanos() as i128
}

/// Sleeps (tokio) until the instant `at_ns`, at most 10 s: the workers of a fleet start
/// together at an instant their parent chose, and one given a wrong instant does not hang.
pub async fn sleep_until(at_ns: i128) {
    let pause = (at_ns - now_ns()).clamp(0, 10 * NS_PER_S);
    tokio::time::sleep(Duration::from_nanos(pause as u64)).await;
}

//! Bounded polling: the only way the kit waits for a server, and the tests' way to wait for
//! a condition.

use std::time::{Duration, Instant};

/// Calls `check` until it returns `Some`, backing off from 2 ms to 100 ms between tries.
/// Returns `None` once `timeout` has passed without success (`check` has then run at least
/// once, and once more at the deadline).
pub fn poll<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(2);
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        // Polling, not synchronisation: the condition is re-checked after every pause.
        std::thread::sleep(pause.min(deadline - now));
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

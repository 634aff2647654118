//! The one way the end-to-end tests wait for a condition: poll it, bounded, and fail with what
//! was awaited. [`within`] blocks (the kit's backoff, 2 ms to 100 ms); [`within_async`] is
//! the same for async tests, where blocking a runtime thread could starve the very task that
//! is awaited, and polls every 10 ms on tokio's clock.

use std::time::Duration;

use throttle_testkit::poll;

/// Polls `check` until it gives `Some`, and returns that; panics after `timeout`, naming
/// `what` was awaited.
#[track_caller]
pub fn within<T>(what: &str, timeout: Duration, check: impl FnMut() -> Option<T>) -> T {
    poll(timeout, check).unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

/// [`within`] for async code: polls `check` every 10 ms (tokio's sleep, so other tasks run in
/// between) until it gives `Some`; panics after `timeout`.
pub async fn within_async<T>(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

//! The scenario every listening test runs: a reserved call asleep in one process, and a pause
//! set by another while it sleeps.

use std::time::Duration;

use redis_throttle::{Grant, Throttle};
use tokio::time::Instant;

/// When the reservation is sure to have been made (one round trip on loopback, with room for a
/// busy machine), and the pause is set.
const PAUSE_AFTER: Duration = Duration::from_millis(50);

/// What became of the reserved call.
#[derive(Debug)]
pub struct PausedCall {
    pub grant: Grant,
    /// When the pause was sent, from `start`.
    pub sent: Duration,
    /// When the reserved call began.
    pub start: Instant,
}

/// Reserves a call on `caller`, whose bucket is empty so that the call sleeps for its token,
/// and while it sleeps has `other` pause the bucket for `pause`; waits for the call's grant.
pub async fn pause_a_reserved_call<A, B>(caller: &A, other: &B, pause: Duration) -> PausedCall
where
    A: Throttle + Clone + Send + Sync + 'static,
    B: Throttle,
{
    let start = Instant::now();
    let reserved = tokio::spawn({
        let caller = caller.clone();
        async move { caller.acquire().await.expect("the reserved call") }
    });
    tokio::time::sleep(PAUSE_AFTER).await;
    let sent = start.elapsed();
    other.pause(pause).await.expect("the pause");
    let grant = reserved.await.expect("the reserved call's task");
    PausedCall { grant, sent, start }
}

/// The reserved call that began at `start` was granted (just now: call this right after the
/// grant) no earlier than the end of the pause of `pause` sent `sent` after `start`: the
/// server held it back for the whole pause, which began no earlier than it was sent.
#[track_caller]
pub fn assert_granted_after_the_pause(start: Instant, sent: Duration, pause: Duration, at: &str) {
    let granted = start.elapsed();
    assert!(
        granted >= sent + pause,
        "{at}: granted {granted:?} after the start, inside the pause set at {sent:?}"
    );
}

//! Calls made at once through capped limiters, counting the grants held at the same time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis_throttle::Throttle;

/// Makes `calls` calls at once, the i-th through `limiters[i % len]` holding its grant (and
/// its slot) for `hold(i)`; every call must be served with a slot. Returns the most grants held
/// at once, counted while held: under a cap, at most the cap.
pub async fn most_held_at_once<T>(limiters: &[T], calls: u64, hold: fn(u64) -> Duration) -> u64
where
    T: Throttle + Clone + Send + Sync + 'static,
{
    let open = Arc::new(AtomicU64::new(0));
    let most = Arc::new(AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..calls {
        let limiter = limiters[(i % limiters.len() as u64) as usize].clone();
        let (open, most) = (open.clone(), most.clone());
        tasks.spawn(async move {
            let grant = limiter.acquire().await?;
            assert!(grant.slot().is_some(), "a capped grant holds a slot");
            let now = open.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(hold(i)).await;
            open.fetch_sub(1, Ordering::SeqCst);
            drop(grant);
            Ok::<_, redis_throttle::Error>(())
        });
    }
    let mut served = 0;
    while let Some(call) = tasks.join_next().await {
        call.expect("a call's task").expect("a call served");
        served += 1;
    }
    assert_eq!(served, calls, "every call served");
    most.load(Ordering::SeqCst)
}

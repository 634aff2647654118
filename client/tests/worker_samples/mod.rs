//! The worker processes' calls, shared by the backends and multi-limits tests: tasks that
//! acquire in a row from one instant, each grant noted as a [`Sample`], and the report the
//! parent reads.

use redis_throttle::{Grant, Throttle};
use throttle_e2e::wall::{now_ns, sleep_until};
use throttle_e2e::{Report, Sample};

/// From `go_at` (ns since the epoch), `tasks` tasks of `limiter`'s each acquire up to `calls`
/// times in a row, while `before_end` holds for the instant a call starts; `check` sees every
/// grant. Then prints the report: `START <ns>`, a `SAMPLE` per grant and the counters.
pub async fn acquire_and_report<T>(
    limiter: T,
    go_at: i128,
    tasks: usize,
    calls: usize,
    before_end: impl Fn(i128) -> bool + Copy + Send + 'static,
    check: impl Fn(&Grant) + Copy + Send + 'static,
) where
    T: Throttle + Clone + Send + Sync + 'static,
{
    sleep_until(go_at).await;
    let first = now_ns();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut samples = Vec::new();
                for _ in 0..calls {
                    let start = now_ns();
                    if !before_end(start) {
                        break;
                    }
                    let grant = limiter.acquire().await.expect("acquire");
                    let done = now_ns();
                    check(&grant);
                    samples.push(Sample {
                        start,
                        done,
                        slept: grant.slept.as_nanos() as i128,
                    });
                }
                samples
            })
        })
        .collect();
    let mut samples = Vec::new();
    for handle in handles {
        samples.extend(handle.await.unwrap());
    }
    Report::print(first, &samples, &limiter.metrics());
}

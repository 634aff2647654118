//! Takes a few tokens from a small shared bucket and prints how long each call waited.
//!
//! ```text
//! cargo run -p redis-throttle --example acquire -- [redis://127.0.0.1:6379] [calls]
//! ```
//!
//! The server needs the module: `redis-server --loadmodule target/debug/libredis_throttle_module.so`.
//! The bucket holds 3 tokens and refills 2 per second, so the first three calls go at once
//! and the rest are spaced 500 ms apart. Run two copies at the same time to see them share
//! the bucket.

use redis_throttle::prelude::*;
use std::time::{Duration, Instant};

use redis_throttle::{Error, Limiter, Quota, Rate};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let calls: u32 = match args.next() {
        Some(n) => n.parse()?,
        None => 8,
    };

    // One connection per process, listening to the quotas' announcements.
    let conn = redis_throttle::connect(&url)
        .await
        .map_err(|e| format!("cannot connect to {url}: {e}"))?;

    let limiter = Limiter::new(
        conn,
        "redis-throttle:example",
        Quota::new(3, Rate::per_second(2))?,
    );
    println!(
        "bucket {:?}: capacity {}, {} tokens/s",
        limiter.key(),
        limiter.quota().capacity(),
        limiter.quota().rate()
    );

    let start = Instant::now();
    for call in 1..=calls {
        match limiter.acquire().await {
            Ok(grant) => println!(
                "call {call:2} at {:7.3} s: waited {:4} ms, {} tokens left",
                start.elapsed().as_secs_f64(),
                grant.waited.as_millis(),
                grant.remaining
            ),
            // No server or no module: say why once, rather than for every call.
            Err(err @ (Error::ModuleNotLoaded { .. } | Error::Connection(_))) if call == 1 => {
                return Err(err.into());
            }
            Err(err) => println!("call {call:2}: {err}"),
        }
    }

    // A call that may wait at most 100 ms: refused at once, taking nothing, if that is
    // not enough.
    match limiter
        .acquire_with(Demand::call().within(Duration::from_millis(100)))
        .await
    {
        Ok(grant) => println!("deadline call: waited {:?}", grant.waited),
        Err(Error::DeadlineExceeded { needed, .. }) => {
            println!("deadline call: refused, the token would take {needed:?}")
        }
        Err(err) => println!("deadline call: {err}"),
    }

    let metrics = limiter.metrics();
    println!(
        "{} granted, {} gave up, mean wait {:?}, p90 wait <= {}",
        metrics.granted,
        metrics.gave_up,
        metrics.mean_wait().unwrap_or_default(),
        metrics
            .wait_histogram
            .quantile(0.9)
            .map_or_else(|| "-".to_owned(), |d| format!("{d:?}"))
    );
    Ok(())
}

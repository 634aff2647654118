//! A reqwest client with the throttle middleware against a supplier that answers 429.
//!
//! ```text
//! cargo run -p redis-throttle --features reqwest --example reqwest_supplier -- [redis://127.0.0.1:6379] [requests]
//! ```
//!
//! The server needs the module: `redis-server --loadmodule target/debug/libredis_throttle_module.so`.
//! The example starts a mock supplier on 127.0.0.1 that answers `429 Too Many Requests` with
//! `Retry-After: 1` to the 3rd and 4th requests it sees, and 200 to the others. The client's
//! bucket allows 5 at once and 5 per second. Each 429 pauses the bucket in Redis for a second
//! (every replica on the key waits, not only this one) and the request is sent again; the
//! caller sees only the 200s. Run two copies at once to see one's 429 hold back the other.

use redis_throttle::prelude::*;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use redis_throttle::http::{RetryPolicy, ThrottleMiddleware};
use redis_throttle::{Limiter, Quota, Rate};
use reqwest_middleware::{ClientBuilder, Middleware, Next};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let requests: u32 = match args.next() {
        Some(n) => n.parse()?,
        None => 8,
    };

    // One connection per process, listening to the quotas' announcements.
    let conn = redis_throttle::connect(&url)
        .await
        .map_err(|e| format!("cannot connect to {url}: {e}"))?;

    let start = Instant::now();
    let supplier = start_supplier(start).await?;
    let limiter = Limiter::new(
        conn,
        "redis-throttle:example:supplier",
        Quota::new(5, Rate::per_second(5))?,
    );
    let pushbacks = Arc::new(AtomicUsize::new(0));
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(ThrottleMiddleware::new(limiter.clone()).policy(RetryPolicy::default()))
        // Inside the throttle: sees every send, the ones that are sent again included.
        .with(Sends {
            start,
            pushbacks: Arc::clone(&pushbacks),
        })
        .build();

    for request in 1..=requests {
        let response = client
            .get(format!("http://{supplier}/status/{request}"))
            .send()
            .await?;
        println!(
            "{:7.3} s  request {request} done: {}",
            start.elapsed().as_secs_f64(),
            response.status()
        );
    }
    let metrics = limiter.metrics();
    println!(
        "all done in {:.3} s: {requests} requests, {} sends (one token each), {} 429s seen, mean wait {:?}",
        start.elapsed().as_secs_f64(),
        metrics.granted,
        pushbacks.load(Ordering::SeqCst),
        metrics.mean_wait().unwrap_or_default(),
    );
    Ok(())
}

/// The mock supplier: 429 with `Retry-After: 1` to its 3rd and 4th requests.
async fn start_supplier(start: Instant) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let seen = Arc::new(AtomicUsize::new(0));
    let app = axum::Router::new().fallback(move || {
        let seen = Arc::clone(&seen);
        async move {
            let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
            let at = start.elapsed().as_secs_f64();
            if n == 3 || n == 4 {
                println!("{at:7.3} s    supplier: request #{n} -> 429, Retry-After: 1");
                (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, "1")]).into_response()
            } else {
                println!("{at:7.3} s    supplier: request #{n} -> 200");
                "ok".into_response()
            }
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(addr)
}

/// Prints each send as the throttle lets it through.
struct Sends {
    start: Instant,
    pushbacks: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl Middleware for Sends {
    async fn handle(
        &self,
        request: reqwest::Request,
        extensions: &mut http::Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<reqwest::Response> {
        println!(
            "{:7.3} s  send {} {}",
            self.start.elapsed().as_secs_f64(),
            request.method(),
            request.url().path()
        );
        let response = next.run(request, extensions).await?;
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            self.pushbacks.fetch_add(1, Ordering::SeqCst);
            let retry_after = response.headers().get(header::RETRY_AFTER);
            println!(
                "{:7.3} s  429 seen, Retry-After: {}: the bucket pauses fleet-wide, then this request goes again",
                self.start.elapsed().as_secs_f64(),
                retry_after.and_then(|v| v.to_str().ok()).unwrap_or("none"),
            );
        }
        Ok(response)
    }
}

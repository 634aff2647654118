//! Costs known only after the call: an LLM API limited in requests per minute and tokens per
//! minute, whose replies say how many tokens a call used, called through the
//! `reqwest-middleware` middleware.
//!
//! ```text
//! cargo run -p redis-throttle --features reqwest --example llm_supplier -- [redis://127.0.0.1:6379] [calls]
//! ```
//!
//! The server needs the module (`redis-server --loadmodule target/debug/libredis_throttle_module.so`)
//! or nothing at all with `Backend::Script`. The example starts a mock LLM API on 127.0.0.1:
//! 30 requests and 3 000 tokens per minute, in buckets that refill continuously, answering
//! 429 past either; each reply's JSON body carries `usage.total_tokens`, between 40 and 160
//! tokens. The client sends each call through `ThrottleMiddleware`, whose picker takes one
//! request and the call's estimate (from its prompt, kept low) from one `MultiLimiter`
//! before the call; after reading the body it settles the grant to the usage the reply
//! reports, through the `SettleHandle` in the response's extensions: the extra is taken into
//! debt, the part not used goes back while nothing was taken after it. A 429 would pause the
//! fleet's buckets and be resent. It prints each call's estimate, usage and settlement, and
//! the 429s the supplier sent (0).

use redis_throttle::prelude::*;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::IntoResponse;
use redis_throttle::http::{Pick, RequestHead, RetryPolicy, SettleHandle, ThrottleMiddleware};
use redis_throttle::{MultiLimiter, Quota, Rate};

const MINUTE: Duration = Duration::from_secs(60);
const RPM: u64 = 30;
const TPM: u64 = 3_000;
/// The tokens a call without an estimate takes.
const DEFAULT_COST: u64 = 100;
/// The completion's length the estimate counts on: low, since an estimate above the usage
/// comes back only while no other call took tokens after it, and one below is debited.
const EXPECTED_COMPLETION: u64 = 40;

/// A call's estimated tokens, in the request's extensions for the picker.
#[derive(Clone, Copy, Debug)]
struct Estimate(u64);

/// The prompt's tokens (about 4 bytes each) and the completion's expected length.
fn estimate(prompt: &str) -> Estimate {
    Estimate(prompt.len().div_ceil(4) as u64 + EXPECTED_COMPLETION)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "redis://127.0.0.1:6379".to_owned());
    let calls: u64 = match args.next() {
        Some(n) => n.parse()?,
        None => 36,
    };
    let supplier = start_supplier().await?;
    // One connection per process, listening to the quotas' announcements.
    let conn = redis_throttle::connect(&url).await?;
    // One hash tag, so both keys are on one Redis Cluster shard.
    let limiter = MultiLimiter::builder()
        .limit("{llm}:rpm", Quota::new(RPM, Rate::per(RPM, MINUTE))?, 1)
        .per_token("{llm}:tpm", Quota::new(TPM, Rate::per(TPM, MINUTE))?)
        .cost(DEFAULT_COST)
        .build(conn)?;
    let picked = limiter.clone();
    let throttle = ThrottleMiddleware::per_request(move |request: &RequestHead<'_>| {
        let pick = Pick::new(picked.clone());
        match request.extensions().get::<Estimate>() {
            Some(Estimate(tokens)) => pick.tokens(*tokens),
            None => pick,
        }
    })
    // A completion refused with a 429 was not run: sending the POST again is safe.
    .policy(RetryPolicy::default().retry_non_idempotent(true));
    let http = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(throttle)
        .build();
    let start = Instant::now();
    for call in 1..=calls {
        let prompt = format!("call {call}");
        let Estimate(tokens) = estimate(&prompt);
        let sent = Instant::now();
        let response = http
            .post(format!("http://{supplier}/v1/chat/completions"))
            .with_extension(estimate(&prompt))
            .body(prompt)
            .send()
            .await?;
        let waited = sent.elapsed();
        let status = response.status();
        // Taken before the body, which consumes the response.
        let handle = response
            .extensions()
            .get::<SettleHandle>()
            .cloned()
            .ok_or("the response has no SettleHandle: is ThrottleMiddleware in the client?")?;
        let body = response.text().await?;
        let Some(usage) = total_tokens(&body) else {
            // No usage (a 429 passed on): the estimate stands.
            println!("call {call:>3}: {status}, no usage in {body:?}; the estimate stands");
            continue;
        };
        let settled = handle.settle(usage).await?.unwrap_or_default();
        println!(
            "call {call:>3} at {:>6.2} s (took {:>5.2} s): {status}, estimate {tokens:>3}, used \
             {usage:>3}: +{} taken, {} given back",
            start.elapsed().as_secs_f64(),
            waited.as_secs_f64(),
            settled.debited,
            settled.given_back,
        );
    }
    let seen = limiter.metrics();
    println!(
        "{calls} calls, {} tokens debited after the fact, {} given back; 429s from the supplier: \
         {} ({} resent)",
        seen.pushback.tokens_debited,
        seen.tokens_given_back,
        REFUSED.lock().map(|n| *n).unwrap_or(0),
        seen.pushback.retries,
    );
    Ok(())
}

/// `usage.total_tokens` in the reply's JSON (a JSON parser would do; the example keeps its
/// dependencies to the crate's).
fn total_tokens(body: &str) -> Option<u64> {
    let (_, rest) = body.split_once(r#""total_tokens":"#)?;
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Requests the mock refused.
static REFUSED: Mutex<u64> = Mutex::new(0);

/// The mock LLM API: two buckets, as such APIs keep them, that refill continuously: 30
/// requests and 3 000 tokens, each refilled over a minute; a call they cannot pay is a 429.
async fn start_supplier() -> std::io::Result<SocketAddr> {
    let buckets = Arc::new(Mutex::new((
        Bucket::full(RPM as f64),
        Bucket::full(TPM as f64),
    )));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let app = axum::Router::new().fallback(move |body: String| {
        let buckets = Arc::clone(&buckets);
        async move {
            // 40 to 160 tokens, from the prompt, so runs are alike.
            let usage = 40 + body.bytes().map(u64::from).product::<u64>() % 121;
            let mut buckets = buckets.lock().unwrap_or_else(|e| e.into_inner());
            let (requests, tokens) = &mut *buckets;
            if !(requests.has(1.0) && tokens.has(usage as f64)) {
                *REFUSED.lock().unwrap_or_else(|e| e.into_inner()) += 1;
                return (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "2")]).into_response();
            }
            requests.spend(1.0);
            tokens.spend(usage as f64);
            let body = format!(
                r#"{{"object":"chat.completion","choices":[{{"message":{{"content":"..."}}}}],"usage":{{"total_tokens":{usage}}}}}"#
            );
            ([("content-type", "application/json")], body).into_response()
        }
    });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(addr)
}

/// One of the mock's buckets: its level, refilled to `capacity` over a minute.
struct Bucket {
    capacity: f64,
    level: f64,
    at: Instant,
}

impl Bucket {
    fn full(capacity: f64) -> Bucket {
        Bucket {
            capacity,
            level: capacity,
            at: Instant::now(),
        }
    }

    fn has(&mut self, n: f64) -> bool {
        let now = Instant::now();
        let refill =
            self.capacity * now.duration_since(self.at).as_secs_f64() / MINUTE.as_secs_f64();
        self.level = (self.level + refill).min(self.capacity);
        self.at = now;
        // A margin of a hundredth for the two clocks' rounding.
        self.level + 0.01 >= n
    }

    fn spend(&mut self, n: f64) {
        self.level -= n;
    }
}

//! The new user's case, shared by the tower and reqwest tests: a [`MultiLimiter`] of requests
//! (30, one more every 20 s) and tokens (3 000, one more every 1.2 s; a call estimates 100)
//! behind an HTTP layer, and a loopback supplier answering 200 with an LLM API's rate-limit
//! headers. Each count must sync the limits of its own unit only.

use redis_throttle::prelude::*;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use axum::response::IntoResponse;
use axum::Router;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis_throttle::http::SettleHandle;
use redis_throttle::{Backend, Limiter, MultiLimiter, Quota, Rate};
use throttle_e2e::{multiplexed, Flavor};
use tokio::time::Instant;

use crate::http_support::bounded;

/// One token every 20 s: no request refills within a case.
pub const REQUEST_INTERVAL: Duration = Duration::from_secs(20);
/// One token every 1.2 s.
pub const TOKEN_INTERVAL: Duration = Duration::from_millis(1_200);

fn requests_quota() -> Quota {
    Quota::new(30, Rate::per(30, REQUEST_INTERVAL * 30)).unwrap()
}

fn tokens_quota() -> Quota {
    Quota::new(3_000, Rate::per(3_000, TOKEN_INTERVAL * 3_000)).unwrap()
}

/// The user's limiter, its buckets `{tag}:rpm` (a call's 1) and `{tag}:tpm` (a call's 100).
pub fn multi<C>(conn: C, tag: &str, backend: Backend) -> MultiLimiter<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    MultiLimiter::builder()
        .limit(format!("{{{tag}}}:rpm"), requests_quota(), 1)
        .per_token(format!("{{{tag}}}:tpm"), tokens_quota())
        .cost(100)
        .backend(backend)
        .build(conn)
        .unwrap()
}

/// Each bucket's whole tokens left (`THROTTLE.PEEK`, through a limiter of its own on its key),
/// requests then tokens.
pub async fn buckets<C>(conn: &C, tag: &str, backend: Backend) -> (u64, u64)
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    let peek = |key: String, quota| async move {
        Limiter::builder(key, quota)
            .backend(backend)
            .build(conn.clone())
            .unwrap()
            .peek()
            .await
            .unwrap()
            .remaining
    };
    (
        peek(format!("{{{tag}}}:rpm"), requests_quota()).await,
        peek(format!("{{{tag}}}:tpm"), tokens_quota()).await,
    )
}

/// One response's headers and what one call through the layer must leave.
#[derive(Debug)]
pub struct Case {
    pub name: &'static str,
    pub headers: &'static [(&'static str, &'static str)],
    /// Whole tokens left in each bucket right after the response (no refill).
    pub requests: u64,
    pub tokens: u64,
    /// `PushbackMetrics::syncs`, `syncs_unchanged`.
    pub syncs: (u64, u64),
    /// The MTAKE and one `THROTTLE.SYNC` per bucket synced.
    pub round_trips: u64,
}

/// After the call's take the buckets hold 29 requests and 2 900 tokens.
pub const CASES: &[Case] = &[
    // The report: the supplier has the calls the bucket has, and far fewer tokens.
    Case {
        name: "llm",
        headers: &[
            ("x-ratelimit-limit-requests", "30"),
            ("x-ratelimit-remaining-requests", "29"),
            ("x-ratelimit-reset-requests", "2s"),
            ("x-ratelimit-limit-tokens", "3000"),
            ("x-ratelimit-remaining-tokens", "88"),
            ("x-ratelimit-reset-tokens", "58.24s"),
        ],
        requests: 29,
        tokens: 88,
        syncs: (1, 0),
        round_trips: 2,
    },
    Case {
        name: "both-lower",
        headers: &[
            ("x-ratelimit-remaining-requests", "28"),
            ("x-ratelimit-reset-requests", "2s"),
            ("x-ratelimit-remaining-tokens", "88"),
            ("x-ratelimit-reset-tokens", "58.24s"),
        ],
        requests: 28,
        tokens: 88,
        syncs: (2, 0),
        round_trips: 3,
    },
    // A family of one unit, requests: the tokens bucket is left alone.
    Case {
        name: "requests-only",
        headers: &[("ratelimit", r#""default";r=7;t=60"#)],
        requests: 7,
        tokens: 2_900,
        syncs: (1, 0),
        round_trips: 2,
    },
    Case {
        name: "tokens-only",
        headers: &[
            ("x-ratelimit-remaining-tokens", "88"),
            ("x-ratelimit-reset-tokens", "1m"),
        ],
        requests: 29,
        tokens: 88,
        syncs: (1, 0),
        round_trips: 2,
    },
    // Nothing below what the buckets hold: no round trip.
    Case {
        name: "nothing-less",
        headers: &[
            ("x-ratelimit-remaining-requests", "29"),
            ("x-ratelimit-remaining-tokens", "2900"),
        ],
        requests: 29,
        tokens: 2_900,
        syncs: (0, 0),
        round_trips: 1,
    },
    // No calls left until a reset: the requests bucket pauses, the tokens one is untouched.
    Case {
        name: "no-calls-left",
        headers: &[
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "30s"),
            ("x-ratelimit-remaining-tokens", "2950"),
        ],
        requests: 0,
        tokens: 2_900,
        syncs: (1, 0),
        round_trips: 2,
    },
];

/// The headers as a response's.
pub fn header_pairs(case: &Case) -> Vec<(HeaderName, HeaderValue)> {
    case.headers
        .iter()
        .map(|(name, value)| {
            (
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            )
        })
        .collect()
}

/// An LLM API on a loopback port, serving `app`; dropping it stops it.
struct Loopback {
    addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl Loopback {
    async fn serve(app: Router) -> Loopback {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Loopback { addr, server }
    }

    fn url(&self) -> String {
        format!("http://{}/v1/chat/completions", self.addr)
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// A loopback supplier answering every request 200 with one case's headers.
async fn case_supplier(case: &'static Case) -> Loopback {
    Loopback::serve(Router::new().fallback(move || async move {
        let mut response = "ok".into_response();
        response.headers_mut().extend(header_pairs(case));
        response
    }))
    .await
}

/// On a fresh server of `flavor` running `backend` (one such test at a time), `check` given
/// the server's URL and the label `<layer>:<flavor>` for its keys and messages, bounded in
/// time.
fn on_a_server<Fut: Future<Output = ()>>(
    flavor: Flavor,
    backend: Backend,
    layer: &str,
    check: impl FnOnce(String, String) -> Fut,
) {
    let _serial = throttle_e2e::serial();
    let server = throttle_e2e::server_for(flavor, backend);
    let label = format!("{layer}:{flavor}");
    throttle_e2e::runtime().block_on(bounded(check(server.url(), label)));
}

/// Every case against a real server of `flavor` running `backend`: one GET through the layer
/// `send` builds around the limiter, then each bucket as the case says, plus what refilled
/// since the request was sent (measured), and the counters exactly.
pub fn each_case<F, Fut>(flavor: Flavor, backend: Backend, layer: &str, send: F)
where
    F: Fn(MultiLimiter<MultiplexedConnection>, String) -> Fut,
    Fut: Future<Output = u16>,
{
    on_a_server(flavor, backend, layer, |url, label| async move {
        each_case_at(&url, backend, &label, send).await;
    });
}

async fn each_case_at<F, Fut>(url: &str, backend: Backend, label: &str, send: F)
where
    F: Fn(MultiLimiter<MultiplexedConnection>, String) -> Fut,
    Fut: Future<Output = u16>,
{
    let conn = multiplexed(url).await;
    for case in CASES {
        let tag = format!("{label}:{}", case.name);
        let limiter = multi(conn.clone(), &tag, backend);
        // Its first round trips check (and load) the library: counted apart, before the case.
        let warm_up = warmed(&limiter).await;
        let supplier = case_supplier(case).await;
        let sent = Instant::now();
        let status = send(limiter.clone(), supplier.url()).await;
        assert_eq!(status, 200, "{label} {}", case.name);
        let (requests, tokens) = buckets(&conn, &tag, backend).await;
        let elapsed = sent.elapsed();
        let refilled = |interval: Duration| (elapsed.as_nanos() / interval.as_nanos()) as u64;
        assert!(
            (case.requests..=case.requests + refilled(REQUEST_INTERVAL)).contains(&requests),
            "{label} {case:?}: {requests} requests left after {elapsed:?}"
        );
        assert!(
            (case.tokens..=case.tokens + refilled(TOKEN_INTERVAL)).contains(&tokens),
            "{label} {case:?}: {tokens} tokens left after {elapsed:?}"
        );
        let metrics = limiter.metrics();
        let pushback = metrics.pushback;
        assert_eq!(
            (pushback.syncs, pushback.syncs_unchanged),
            case.syncs,
            "{label} {case:?}"
        );
        assert_eq!(
            metrics.round_trips - warm_up,
            case.round_trips,
            "{label} {case:?}"
        );
    }
}

/// Peeks every bucket of a fresh limiter, so that its backend is settled (the library checked
/// and loaded) before a case counts round trips: the round trips that took.
async fn warmed(limiter: &MultiLimiter<MultiplexedConnection>) -> u64 {
    limiter.peek().await.expect("peek");
    limiter.metrics().round_trips
}

/// The calls of the settle case, in order: each request's estimate, taken before it is sent,
/// and the usage its response reports, to which it is settled.
pub const SETTLED_CALLS: &[Call] = &[
    // Cost more than estimated: the extra 50 is debited.
    Call {
        estimate: 100,
        usage: 150,
        debited: 50,
        given_back: 0,
    },
    // Cost less, and nothing was taken after it: the unused 80 come back.
    Call {
        estimate: 200,
        usage: 120,
        debited: 0,
        given_back: 80,
    },
    Call {
        estimate: 100,
        usage: 100,
        debited: 0,
        given_back: 0,
    },
];

/// One call of the settle case.
#[derive(Debug)]
pub struct Call {
    pub estimate: u64,
    pub usage: u64,
    /// What settling it to its usage must do.
    pub debited: u64,
    pub given_back: u64,
}

/// A loopback LLM API answering every request 200 with a JSON body whose
/// `usage.total_tokens` is the request's `x-usage` header (the test's script), and no
/// rate-limit headers: the buckets move only by the takes and the settles.
async fn usage_supplier() -> Loopback {
    let app = Router::new().fallback(|headers: axum::http::HeaderMap| async move {
        let usage = headers
            .get("x-usage")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("0")
            .to_owned();
        format!(
            r#"{{"object":"chat.completion","usage":{{"prompt_tokens":1,"total_tokens":{usage}}}}}"#
        )
    });
    Loopback::serve(app).await
}

/// `usage.total_tokens` in an LLM API's JSON body (the tests have no JSON parser).
pub fn total_tokens(body: &str) -> Option<u64> {
    let (_, rest) = body.split_once(r#""total_tokens":"#)?;
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// What one call through a layer did: the response's status, and its settle handle's first
/// and second settles to the usage the body reported (`None`: nothing done).
pub type Settles = (u16, Option<(u64, u64)>, Option<(u64, u64)>);

/// The settle case against a real server of `flavor` running `backend`: each call of
/// [`SETTLED_CALLS`] through the layer `send` builds around the limiter (its picker takes the
/// `x-estimate` header's tokens; the request's `x-usage` header is what the supplier will
/// report), settled once from the body; then each bucket exactly as the takes and settles
/// leave it, plus what refilled since the first request (measured), and the counters exactly.
pub fn settles_each_call<F, Fut>(flavor: Flavor, backend: Backend, layer: &str, send: F)
where
    F: Fn(MultiLimiter<MultiplexedConnection>, String, u64, u64) -> Fut,
    Fut: Future<Output = Settles>,
{
    on_a_server(flavor, backend, layer, |url, label| async move {
        settles_each_call_at(&url, backend, &label, send).await;
    });
}

async fn settles_each_call_at<F, Fut>(url: &str, backend: Backend, label: &str, send: F)
where
    F: Fn(MultiLimiter<MultiplexedConnection>, String, u64, u64) -> Fut,
    Fut: Future<Output = Settles>,
{
    let conn = multiplexed(url).await;
    let tag = format!("{label}:settle");
    let limiter = multi(conn.clone(), &tag, backend);
    let warm_up = warmed(&limiter).await;
    let supplier = usage_supplier().await;
    let sent = Instant::now();
    for call in SETTLED_CALLS {
        let (status, first, second) =
            send(limiter.clone(), supplier.url(), call.estimate, call.usage).await;
        assert_eq!(status, 200, "{label} {call:?}");
        assert_eq!(
            first,
            Some((call.debited, call.given_back)),
            "{label} {call:?}"
        );
        assert_eq!(second, None, "{label} {call:?}: settled twice");
    }
    let (requests, tokens) = buckets(&conn, &tag, backend).await;
    let elapsed = sent.elapsed();
    let refilled = |interval: Duration| (elapsed.as_nanos() / interval.as_nanos()) as u64;
    let calls = SETTLED_CALLS.len() as u64;
    let used: u64 = SETTLED_CALLS.iter().map(|c| c.usage).sum();
    assert!(
        (30 - calls..=30 - calls + refilled(REQUEST_INTERVAL)).contains(&requests),
        "{label}: {requests} requests left after {elapsed:?}"
    );
    assert!(
        (3_000 - used..=3_000 - used + refilled(TOKEN_INTERVAL)).contains(&tokens),
        "{label}: {tokens} tokens left after {elapsed:?}, {used} used"
    );
    let metrics = limiter.metrics();
    assert_eq!(metrics.granted, calls, "{label} {metrics:?}");
    assert_eq!(
        (metrics.pushback.tokens_debited, metrics.tokens_given_back),
        (50, 80),
        "{label} {metrics:?}"
    );
    // Each call's MTAKE, one DEBIT, one GIVE; nothing to sync.
    assert_eq!(
        metrics.round_trips - warm_up,
        calls + 2,
        "{label} {metrics:?}"
    );
    assert_eq!(metrics.pushback.syncs, 0, "{label} {metrics:?}");
}

/// A settle's outcome as `(debited, given_back)`.
/// Settles `handle` to the usage in the JSON `body`, twice: what each settle did.
pub async fn settle_twice(
    handle: &SettleHandle,
    body: &str,
) -> (Option<(u64, u64)>, Option<(u64, u64)>) {
    let used = total_tokens(body).unwrap();
    let first = outcome(handle.settle(used).await.unwrap());
    let second = outcome(handle.settle(used).await.unwrap());
    (first, second)
}

pub fn outcome(settled: Option<redis_throttle::Settled>) -> Option<(u64, u64)> {
    settled.map(|s| (s.debited, s.given_back))
}

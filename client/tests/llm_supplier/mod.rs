//! The new user's case, shared by the tower and reqwest tests: a [`MultiLimiter`] of requests
//! (30, one more every 20 s) and tokens (3 000, one more every 1.2 s; a call estimates 100)
//! behind an HTTP layer, and a loopback supplier answering 200 with an LLM API's rate-limit
//! headers. Each count must sync the limits of its own unit only.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use axum::response::IntoResponse;
use axum::Router;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis_throttle::{Backend, Limiter, MultiLimiter, Quota, Rate};
use throttle_e2e::multiplexed;
use tokio::time::Instant;

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

/// A loopback supplier answering every request 200 with one case's headers; dropping it
/// stops it.
pub struct Supplier {
    addr: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl Supplier {
    pub async fn start(case: &'static Case) -> Supplier {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().fallback(move || async move {
            let mut response = "ok".into_response();
            response.headers_mut().extend(header_pairs(case));
            response
        });
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Supplier { addr, server }
    }

    pub fn url(&self) -> String {
        format!("http://{}/v1/chat/completions", self.addr)
    }
}

impl Drop for Supplier {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Every case against a real server: one GET through the layer `send` builds around the
/// limiter, then each bucket as the case says, plus what refilled since the request was sent
/// (measured), and the counters exactly.
pub async fn each_case<F, Fut>(url: &str, backend: Backend, label: &str, send: F)
where
    F: Fn(MultiLimiter<MultiplexedConnection>, String) -> Fut,
    Fut: Future<Output = u16>,
{
    let conn = multiplexed(url).await;
    for case in CASES {
        let tag = format!("{label}:{}", case.name);
        let limiter = multi(conn.clone(), &tag, backend);
        let supplier = Supplier::start(case).await;
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
        assert_eq!(metrics.round_trips, case.round_trips, "{label} {case:?}");
    }
}

//! The mock upstream: a central-bank style API, `GET /pix/{id}/status`, limited per
//! integrator (the `x-integrator` header) by its own clock, trusting nothing the callers say.
//! Above the limit a 429 (with `Retry-After`, or bare as nginx's `limit_req`); optionally its
//! count in `X-RateLimit-*` headers, a limit on calls open at once and a slow spell
//! (`crate::open_calls`). It logs every arrival, and its count of open calls at every change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use demo_support::bucket::retry_after_seconds;
use demo_support::mock_server::{lock, LoopbackServer};

use crate::limit::{Allowance, UpstreamMode, Verdict};
use crate::open_calls::{OpenChange, SlowSpell};

/// The header that names the caller's integrator: the unit the quota is counted in.
pub const INTEGRATOR_HEADER: &str = "x-integrator";

/// How the mock answers, beside its limit.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamConfig {
    pub mode: UpstreamMode,
    pub quota: u32,
    /// A 429 carries `Retry-After` (whole seconds, rounded up); `false`: nginx's bare 429.
    pub retry_after: bool,
    /// Every answer carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` (calls it would
    /// serve at once now) and `X-RateLimit-Reset` (seconds, to the ms, until one more is back).
    pub headers: bool,
    /// At most this many calls open at once per integrator; one more is refused (429, with
    /// `Retry-After: 1` when `retry_after`) without counting against the rate.
    pub max_open: Option<u32>,
    /// When served calls take long, from each phase's start ([`Upstream::begin_phase`]).
    pub slow: Option<SlowSpell>,
}

/// One call as the upstream saw it.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub at: Instant,
    pub status: u16,
    /// The call's id, from its URL (see [`crate::wire::call_id`]).
    pub id: String,
    /// The `Retry-After` it was answered with, in whole seconds (429 only).
    pub retry_after_s: Option<u64>,
    /// Refused because the integrator had `max_open` calls open already (a 429 that is not
    /// the rate's).
    pub too_many_open: bool,
}

struct Shared {
    config: UpstreamConfig,
    /// The mock's clock starts here; limits see durations since it.
    epoch: Instant,
    limits: HashMap<String, Allowance>,
    log: Vec<Arrival>,
    /// The slow spell counts from here: the current phase's start.
    phase_start: Instant,
    /// Calls open now, per integrator, and every change of that count.
    open: HashMap<String, u32>,
    open_log: HashMap<String, Vec<OpenChange>>,
    /// Calls served so far: the slow spell spreads their times by it.
    served: u64,
}

type SharedState = Arc<Mutex<Shared>>;

/// A running mock upstream on a loopback port. Dropping it stops the server.
pub struct Upstream {
    server: LoopbackServer,
    shared: SharedState,
}

impl Upstream {
    /// Starts the server on 127.0.0.1 with a free port, with `Retry-After` and no count.
    #[cfg(test)]
    pub async fn start(mode: UpstreamMode, quota: u32) -> std::io::Result<Upstream> {
        Upstream::start_with(UpstreamConfig {
            mode,
            quota,
            retry_after: true,
            headers: false,
            max_open: None,
            slow: None,
        })
        .await
    }

    /// Starts the server on 127.0.0.1 with a free port.
    pub async fn start_with(config: UpstreamConfig) -> std::io::Result<Upstream> {
        let epoch = Instant::now();
        let shared = Arc::new(Mutex::new(Shared {
            config,
            epoch,
            limits: HashMap::new(),
            log: Vec::new(),
            phase_start: epoch,
            open: HashMap::new(),
            open_log: HashMap::new(),
            served: 0,
        }));
        let app = Router::new()
            .route("/pix/{id}/status", get(pix_status))
            // Not limited and not recorded: replicas open their connections with it.
            .route("/health", get(|| async { "ok" }))
            .with_state(Arc::clone(&shared));
        let server = LoopbackServer::start(app, "pix-demo: mock upstream").await?;
        Ok(Upstream { server, shared })
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The calls recorded since the last time, in arrival order; the log starts empty again.
    pub fn take_log(&self) -> Vec<Arrival> {
        std::mem::take(&mut lock(&self.shared).log)
    }

    /// A phase starts at `start`: the slow spell counts from it.
    pub fn begin_phase(&self, start: Instant) {
        lock(&self.shared).phase_start = start;
    }

    /// `integrator`'s count of open calls at every change since the last time, in order; the
    /// log starts empty again (for every integrator).
    pub fn take_open_log(&self, integrator: &str) -> Vec<OpenChange> {
        let mut shared = lock(&self.shared);
        let log = shared.open_log.remove(integrator).unwrap_or_default();
        shared.open_log.clear();
        log
    }

    /// How long until `integrator` has its whole allowance again.
    pub fn full_in(&self, integrator: &str) -> Duration {
        let shared = lock(&self.shared);
        let now = shared.epoch.elapsed();
        shared
            .limits
            .get(integrator)
            .map_or(Duration::ZERO, |a| a.full_in(now))
    }

    /// Stops accepting, lets calls in flight finish (bounded), and returns.
    pub async fn stop(self) {
        self.server.stop().await;
    }
}

async fn pix_status(
    State(shared): State<SharedState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(integrator) = headers
        .get(INTEGRATOR_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty())
    else {
        let missing = format!("missing {INTEGRATOR_HEADER} header\n");
        return (StatusCode::BAD_REQUEST, missing).into_response();
    };
    let (arrival, config, (left, back_in), open) = {
        let mut guard = lock(&shared);
        let state = &mut *guard;
        // The clock is read under the lock, so the limiter sees instants in order.
        let at = Instant::now();
        let now = at - state.epoch;
        let config = state.config;
        let allowance = state
            .limits
            .entry(integrator.to_owned())
            .or_insert_with(|| Allowance::new(config.mode, config.quota));
        // Concurrency first: a call refused for it costs the integrator no rate.
        let open = state.open.get(integrator).copied().unwrap_or(0);
        let too_many_open = config.max_open.is_some_and(|max| open >= max);
        let (status, retry_after_s) = match (!too_many_open).then(|| allowance.check(now)) {
            // No time the supplier could name: one second, as a bare 429 is read.
            None => (429, Some(1)),
            Some(Verdict::Served) => (200, None),
            Some(Verdict::Refused { retry_after }) => (429, Some(retry_after_seconds(retry_after))),
        };
        let left = allowance.remaining(now);
        let id = id.clone();
        let retry_after_s = retry_after_s.filter(|_| config.retry_after);
        let arrival = Arrival {
            at,
            status,
            id,
            retry_after_s,
            too_many_open,
        };
        state.log.push(arrival.clone());
        // Counted in under the same lock as the check, so no two calls both take the last
        // place.
        let open = (status == 200 && (config.max_open.is_some() || config.slow.is_some()))
            .then(|| OpenCall::enter(state, Arc::clone(&shared), integrator, at));
        (arrival, config, left, open)
    };
    // A served call is open until its answer is ready (a slow one sleeps first); the guard
    // counts it out also when the caller hangs up and the handler is dropped mid-sleep.
    if let Some((open, latency)) = open {
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        drop(open);
    }
    let body = match (arrival.status, arrival.too_many_open) {
        (200, _) => format!("{{\"endToEndId\":{id:?},\"status\":\"SETTLED\"}}\n"),
        (_, false) => "{\"error\":\"rate limit exceeded for this integrator\"}\n".to_owned(),
        (_, true) => {
            "{\"error\":\"too many concurrent requests for this integrator\"}\n".to_owned()
        }
    };
    let status = StatusCode::from_u16(arrival.status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    let mut response = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    let headers = response.headers_mut();
    if let Some(seconds) = arrival.retry_after_s {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    if config.headers {
        headers.insert("x-ratelimit-limit", HeaderValue::from(config.quota));
        headers.insert("x-ratelimit-remaining", HeaderValue::from(left));
        let reset = format!("{:.3}", back_in.as_secs_f64());
        if let Ok(value) = HeaderValue::from_str(&reset) {
            headers.insert("x-ratelimit-reset", value);
        }
    }
    response
}

/// One served call, counted open from [`OpenCall::enter`] until dropped.
struct OpenCall {
    shared: SharedState,
    integrator: String,
}

impl OpenCall {
    /// Counts the call in at `at` (logging the new count) and says how long the slow spell
    /// makes it.
    fn enter(
        state: &mut Shared,
        shared: SharedState,
        integrator: &str,
        at: Instant,
    ) -> (OpenCall, Duration) {
        state.count_open(integrator, at, 1);
        let n = state.served;
        state.served += 1;
        let latency = state.config.slow.map_or(Duration::ZERO, |spell| {
            spell.latency(at.saturating_duration_since(state.phase_start), n)
        });
        let call = OpenCall {
            shared,
            integrator: integrator.to_owned(),
        };
        (call, latency)
    }
}

impl Drop for OpenCall {
    fn drop(&mut self) {
        lock(&self.shared).count_open(&self.integrator, Instant::now(), -1);
    }
}

impl Shared {
    /// Counts one of `integrator`'s calls in (`change` 1) or out (-1) at `at`, and logs the
    /// new count.
    fn count_open(&mut self, integrator: &str, at: Instant, change: i32) {
        let open = self.open.entry(integrator.to_owned()).or_insert(0);
        *open = open.saturating_add_signed(change);
        let open = *open;
        let log = self.open_log.entry(integrator.to_owned()).or_default();
        log.push(OpenChange { at, open });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(url: &str, integrator: Option<&str>) -> reqwest::Response {
        let mut request = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .get(url);
        if let Some(integrator) = integrator {
            request = request.header(INTEGRATOR_HEADER, integrator);
        }
        request.send().await.unwrap()
    }

    #[tokio::test]
    async fn refuses_above_the_quota_per_integrator_with_retry_after() {
        let upstream = Upstream::start(UpstreamMode::Bucket, 3).await.unwrap();
        let url = format!("{}/pix/E123/status", upstream.url());
        for _ in 0..3 {
            assert_eq!(get(&url, Some("a")).await.status(), 200);
        }
        let refused = get(&url, Some("a")).await;
        assert_eq!(refused.status(), 429);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        // Another integrator has its own allowance.
        assert_eq!(get(&url, Some("b")).await.status(), 200);
        // No integrator: not counted, not served.
        assert_eq!(get(&url, None).await.status(), 400);
        // Warm-up calls are not counted either.
        let health = format!("{}/health", upstream.url());
        assert_eq!(get(&health, None).await.status(), 200);

        let log = upstream.take_log();
        let statuses: Vec<u16> = log.iter().map(|a| a.status).collect();
        assert_eq!(statuses, [200, 200, 200, 429, 200]);
        assert_eq!(log[3].retry_after_s, Some(1));
        assert_eq!(log[3].id, "E123");
        assert_eq!(log[0].retry_after_s, None);
        assert!(upstream.take_log().is_empty());
        let full_in = upstream.full_in("a");
        assert!(full_in > Duration::from_millis(500) && full_in <= Duration::from_secs(1));
        assert_eq!(upstream.full_in("nobody"), Duration::ZERO);
        upstream.stop().await;
    }

    #[tokio::test]
    async fn above_its_calls_open_at_once_it_refuses_for_concurrency_not_the_rate() {
        let upstream = Upstream::start_with(UpstreamConfig {
            mode: UpstreamMode::Bucket,
            quota: 10,
            retry_after: true,
            headers: false,
            max_open: Some(1),
            slow: Some(SlowSpell {
                from_s: 0.0,
                until_s: 60.0,
                min_ms: 300,
                max_ms: 300,
            }),
        })
        .await
        .unwrap();
        upstream.begin_phase(Instant::now());
        let url = format!("{}/pix/E123/status", upstream.url());
        let began = Instant::now();
        let slow = tokio::spawn({
            let url = url.clone();
            async move { get(&url, Some("a")).await.status() }
        });
        // The first is open for 300 ms: the second, 50 ms in, finds no room.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let refused = get(&url, Some("a")).await;
        assert_eq!(refused.status(), 429);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        assert!(refused.text().await.unwrap().contains("concurrent"));
        // Another integrator has room of its own.
        assert_eq!(get(&url, Some("b")).await.status(), 200);
        assert_eq!(slow.await.unwrap(), 200);
        assert!(began.elapsed() >= Duration::from_millis(300));

        let log = upstream.take_log();
        let refusals: Vec<(u16, bool)> = log.iter().map(|a| (a.status, a.too_many_open)).collect();
        assert_eq!(refusals, [(200, false), (429, true), (200, false)]);
        let opens: Vec<u32> = upstream.take_open_log("a").iter().map(|c| c.open).collect();
        assert_eq!(opens, [1, 0]);
        assert!(upstream.take_open_log("b").is_empty(), "cleared with a's");
        // The refusal cost no rate: 9 of the 10 are left to "a" (one served).
        assert!(upstream.full_in("a") <= Duration::from_millis(100));
        upstream.stop().await;
    }

    #[tokio::test]
    async fn like_nginx_it_refuses_without_retry_after_and_can_send_its_count() {
        let upstream = Upstream::start_with(UpstreamConfig {
            mode: UpstreamMode::Bucket,
            quota: 3,
            retry_after: false,
            headers: true,
            max_open: None,
            slow: None,
        })
        .await
        .unwrap();
        let url = format!("{}/pix/E123/status", upstream.url());
        let mut left = Vec::new();
        for _ in 0..4 {
            let response = get(&url, Some("a")).await;
            assert!(response.headers().get(header::RETRY_AFTER).is_none());
            assert_eq!(response.headers()["x-ratelimit-limit"], "3");
            left.push((
                response.status().as_u16(),
                response.headers()["x-ratelimit-remaining"]
                    .to_str()
                    .unwrap()
                    .to_owned(),
            ));
            let reset: f64 = response.headers()["x-ratelimit-reset"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!((0.0..=0.334).contains(&reset), "{reset}");
        }
        let expected: Vec<(u16, String)> = [(200, "2"), (200, "1"), (200, "0"), (429, "0")]
            .into_iter()
            .map(|(s, l)| (s, l.to_owned()))
            .collect();
        assert_eq!(left, expected);
        // The library reads what it says.
        let response = get(&url, Some("a")).await;
        let count = redis_throttle::http::read_supplier_count(
            response.headers(),
            std::time::SystemTime::now(),
        );
        let requests = count.requests.expect("a count");
        assert_eq!(requests.left, 0);
        assert!(requests.reset > Duration::ZERO && requests.reset <= Duration::from_millis(334));
        assert_eq!(upstream.take_log()[3].retry_after_s, None);
        upstream.stop().await;
    }
}

//! `dashboard`: one page on loopback with the quotas' rows and small charts of their last
//! minutes. A background task takes a `status` every second and keeps the samples
//! ([`ring::History`]); the page (`page.html`, inline script and SVG) polls `/status.json`
//! and `/history.json` and draws what the server computed ([`chart`]); `/metrics` is the last
//! sample for Prometheus ([`metrics`]). It answers only requests for its own address, and
//! closes slow clients ([`guard`]).

mod chart;
mod guard;
mod metrics;
mod ring;

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Serialize;
use tokio::time::MissedTickBehavior;

use crate::args::QuotaArg;
use crate::failure::{fail, Failure};

use crate::server::Server;
use crate::status::{gather_all, unix_ms, Row};

use chart::{charts, Charts, Frame, HEIGHT, WIDTH};
use ring::{History, Sample};

/// How often the server samples.
const EVERY_MS: u64 = 1000;
/// Samples kept per quota: five minutes.
const PER_QUOTA: usize = 300;
/// The charts span at least this long, before there are older samples.
const MIN_SPAN_MS: u64 = 60_000;
/// Quotas charted at most (the first by key); `/status.json` has them all.
const MAX_QUOTAS: usize = 100;
/// The page.
const PAGE: &str = include_str!("page.html");

/// Refuses a non-loopback address unless `public`.
pub(crate) fn check_listen(listen: SocketAddr, public: bool) -> Result<(), Failure> {
    if listen.ip().is_loopback() || public {
        return Ok(());
    }
    fail(format!(
        "refusing to serve the dashboard on {listen}: not a loopback address, and the page has \
         no login (it shows every quota's key and state to whoever reaches it); serve on \
         127.0.0.1:PORT and reach it through an SSH tunnel, or pass --public to serve there anyway"
    ))
}

/// What the sampler last saw, and the samples.
struct Shared {
    rows: Vec<Row>,
    footer: Vec<String>,
    /// The last sampling's failure, if it failed.
    problem: Option<String>,
    at_ms: u64,
    history: History,
}

type State = Arc<Mutex<Shared>>;

fn lock(state: &State) -> std::sync::MutexGuard<'_, Shared> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Serves the page until stopped.
pub(crate) async fn run(
    url: String,
    mut server: Server,
    pattern: Option<String>,
    quota: Option<QuotaArg>,
    listen: SocketAddr,
    public: bool,
) -> Result<String, Failure> {
    check_listen(listen, public)?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|err| Failure(format!("cannot listen on {listen}: {err}")))?;
    let bound = listener
        .local_addr()
        .map_err(|err| Failure(format!("cannot listen on {listen}: {err}")))?;
    // The first sample before the first request: a server that refuses fails here.
    let first = gather_all(&url, &mut server, pattern.as_deref(), quota.as_ref()).await?;
    let at_ms = unix_ms();
    let mut history = History::new(PER_QUOTA, MAX_QUOTAS, EVERY_MS);
    history.record(at_ms, &first.rows);
    let state: State = Arc::new(Mutex::new(Shared {
        rows: first.rows,
        footer: first.footer,
        problem: None,
        at_ms,
        history,
    }));
    let shown = server.url.clone();
    tokio::spawn(sample(url, server, pattern, quota, Arc::clone(&state)));
    println!("throttle dashboard: http://{bound}/ (the quotas of {shown}; Ctrl-C stops it)");
    let _ = std::io::stdout().flush();
    let app = Router::new()
        .route("/", get(page))
        .route("/status.json", get(status_json))
        .route("/history.json", get(history_json))
        .route("/metrics", get(metrics_text))
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(
            bound,
            guard::check_host,
        ));
    axum::serve(guard::Guarded::new(listener), app)
        .await
        .map_err(|err| Failure(format!("the dashboard's server stopped: {err}")))?;
    Ok(String::new())
}

/// Takes a `status` every period, for as long as the process serves.
async fn sample(
    url: String,
    mut server: Server,
    pattern: Option<String>,
    quota: Option<QuotaArg>,
    state: State,
) {
    let mut ticker = tokio::time::interval(Duration::from_millis(EVERY_MS));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticker.tick().await; // the first tick is now: the first sample is taken
    loop {
        ticker.tick().await;
        let gathered = gather_all(&url, &mut server, pattern.as_deref(), quota.as_ref()).await;
        let at_ms = unix_ms();
        let mut shared = lock(&state);
        match gathered {
            Ok(gathered) => {
                shared.history.record(at_ms, &gathered.rows);
                shared.rows = gathered.rows;
                shared.footer = gathered.footer;
                shared.problem = None;
                shared.at_ms = at_ms;
            }
            // The rows stay as last seen; the page says how old they are and why.
            Err(failure) => shared.problem = Some(failure.to_string()),
        }
    }
}

async fn page() -> Response {
    (
        [(header::CACHE_CONTROL, "no-store")],
        Html(
            PAGE.replace("__EVERY_MS__", &EVERY_MS.to_string())
                .replace("__MAX_QUOTAS__", &MAX_QUOTAS.to_string()),
        ),
    )
        .into_response()
}

fn json<T: Serialize>(value: &T) -> Response {
    match serde_json::to_string(value) {
        Ok(text) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            text,
        )
            .into_response(),
        Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
    }
}

/// The rows of `status --json`, as last sampled.
async fn status_json(axum::extract::State(state): axum::extract::State<State>) -> Response {
    let rows = lock(&state).rows.clone();
    json(&rows)
}

/// `/metrics`: the rows as last sampled, in the Prometheus text format.
async fn metrics_text(axum::extract::State(state): axum::extract::State<State>) -> Response {
    let shared = lock(&state);
    let text = metrics::render(&shared.rows, shared.at_ms, shared.problem.is_some());
    drop(shared);
    (
        [
            (header::CONTENT_TYPE, metrics::CONTENT_TYPE),
            (header::CACHE_CONTROL, "no-store"),
        ],
        text,
    )
        .into_response()
}

/// `/history.json`: the samples and charts of the quotas kept.
#[derive(Serialize)]
struct HistoryJson {
    /// When the rows were last sampled, and now (ms since the epoch).
    at_ms: u64,
    now_ms: u64,
    every_ms: u64,
    /// How long the charts span, ending now.
    window_ms: u64,
    /// The charts' view box.
    width: f64,
    height: f64,
    /// The last sampling's failure.
    problem: Option<String>,
    /// What `status` prints below its table.
    footer: Vec<String>,
    /// Quotas not charted for want of room.
    left_out: usize,
    quotas: Vec<QuotaJson>,
}

#[derive(Serialize)]
struct QuotaJson {
    key: String,
    capacity: u64,
    rate: String,
    samples: Vec<Sample>,
    charts: Charts,
}

async fn history_json(axum::extract::State(state): axum::extract::State<State>) -> Response {
    let shared = lock(&state);
    let now_ms = unix_ms();
    // The charts span the samples kept (a minute at least), up to the whole window.
    let kept_ms = shared
        .history
        .oldest_ms()
        .map_or(0, |oldest| now_ms.saturating_sub(oldest));
    let window_ms = kept_ms.clamp(MIN_SPAN_MS, shared.history.window_ms());
    let frame = Frame {
        to_ms: now_ms,
        window_ms,
    };
    let quotas = shared
        .history
        .quotas()
        .map(|(key, charted)| QuotaJson {
            key: key.clone(),
            capacity: charted.capacity,
            rate: charted.rate.clone(),
            samples: charted.samples.iter().cloned().collect(),
            charts: charts(frame, charted.capacity, charted.samples.iter(), EVERY_MS),
        })
        .collect();
    let body = HistoryJson {
        at_ms: shared.at_ms,
        now_ms,
        every_ms: EVERY_MS,
        window_ms,
        width: WIDTH,
        height: HEIGHT,
        problem: shared.problem.clone(),
        footer: shared.footer.clone(),
        left_out: shared.history.left_out(),
        quotas,
    };
    drop(shared);
    json(&body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{Fleet, Slots, State};

    #[test]
    fn only_loopback_unless_public() {
        for ok in ["127.0.0.1:9911", "[::1]:0", "127.0.0.2:80"] {
            assert!(check_listen(ok.parse().unwrap(), false).is_ok(), "{ok}");
        }
        let refused = check_listen("0.0.0.0:9911".parse().unwrap(), false).unwrap_err();
        assert!(refused.0.contains("not a loopback address"), "{refused}");
        assert!(refused.0.contains("--public"), "{refused}");
        assert!(check_listen("0.0.0.0:9911".parse().unwrap(), true).is_ok());
    }

    #[test]
    fn the_page_is_self_contained() {
        assert!(PAGE.contains("__EVERY_MS__") && PAGE.contains("__MAX_QUOTAS__"));
        // Nothing fetched from elsewhere: no absolute URL but the SVG namespace.
        let outside = PAGE.replace("http://www.w3.org/2000/svg", "");
        assert!(!outside.contains("http://") && !outside.contains("https://"));
        assert!(!outside.contains("src="), "no external script or image");
    }

    /// The row the sampler's and the exporter's tests start from: a reported quota, read, paused
    /// and cut to half, three slots held where the processes report two calls in flight (so a
    /// test tells the server's count from the reported sum).
    pub(super) fn row(key: &str) -> Row {
        Row {
            key: key.to_owned(),
            found: "report",
            node: None,
            capacity: 10,
            rate: "5".to_owned(),
            quota_from: "report",
            state: Some(State {
                tokens: 4,
                until_full_ms: 1200,
                paused_ms: 1500,
                factor_bp: 5000,
            }),
            slots: Some(Slots {
                held: 3,
                first_lease_ms: 900,
            }),
            fleet: Some(Fleet {
                processes: 2,
                grants_per_s: 2.5,
                responses_429: 3,
                held_by_pause: 0,
                held_by_floor: 0,
                in_flight: Some(2),
                max_in_flight: Some(4),
                slot_waits: 0,
                leases_lost: 0,
                waits: 7,
                wait_p50_le_ms: Some(5),
                wait_p99_le_ms: None,
            }),
            problem: None,
            note: None,
        }
    }
}

//! A mock supplier for the client's HTTP integration tests (`http_tower`, `http_reqwest`;
//! feature `http-supplier`): an axum server on 127.0.0.1:0 that pushes back (429, 503 or 403,
//! with or without `Retry-After`) and records every request it sees, with the instant it came
//! in.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::time::Instant;

/// How `Retry-After` is written.
#[derive(Clone, Copy, Debug)]
pub enum RetryAfter {
    /// Delta seconds.
    Seconds(u64),
    /// An HTTP date: the first whole second at least 500 ms away.
    Date,
    /// None: a plain refusal (a 403 that is no rate limit), or one that says only its count.
    Absent,
}

/// What the supplier answers.
#[derive(Clone, Copy, Debug)]
pub struct Script {
    /// 429, 503, 403, ...
    pub status: StatusCode,
    pub retry_after: RetryAfter,
    /// Requests answered with `status` before the first 200 (`usize::MAX`: always).
    pub first: usize,
    /// Also push back on every request that comes before the last `Retry-After` ran out,
    /// as a supplier whose window is closed does.
    pub closed_window: bool,
    /// On every response: `X-RateLimit-Remaining` and `X-RateLimit-Reset` (delta seconds).
    pub count: Option<(u64, u64)>,
}

impl Script {
    /// 429 with `Retry-After: 1` to the first request, 200 after.
    pub fn once() -> Script {
        Script {
            status: StatusCode::TOO_MANY_REQUESTS,
            retry_after: RetryAfter::Seconds(1),
            first: 1,
            closed_window: false,
            count: None,
        }
    }
}

/// One request the supplier saw.
#[derive(Clone, Debug)]
pub struct Hit {
    pub at: Instant,
    pub method: Method,
    /// The `x-client` header: which replica sent it.
    pub client: String,
    pub status: StatusCode,
    /// For a pushback with a `Retry-After`: the instant it names.
    pub until: Option<Instant>,
}

/// The running supplier; dropping it stops the server.
pub struct Supplier {
    addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
    server: tokio::task::JoinHandle<()>,
}

struct Shared {
    script: Script,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Supplier {
    /// Starts answering as `script` says.
    pub async fn start(script: Script) -> Supplier {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            script,
            hits: Arc::clone(&hits),
        });
        let app = Router::new().fallback(answer).with_state(shared);
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Supplier { addr, hits, server }
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request so far.
    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// The requests answered with a pushback (not 200).
    pub fn pushbacks(&self) -> usize {
        self.hits()
            .iter()
            .filter(|h| h.status != StatusCode::OK)
            .count()
    }
}

impl Drop for Supplier {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn answer(State(shared): State<Arc<Shared>>, method: Method, headers: HeaderMap) -> Response {
    let at = Instant::now();
    let client = headers
        .get("x-client")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let script = shared.script;
    let mut hits = shared.hits.lock().unwrap();
    let window = hits
        .iter()
        .filter_map(|h| h.until)
        .max()
        .filter(|until| script.closed_window && at < *until);
    let hit = |status, until| Hit {
        at,
        method: method.clone(),
        client: client.clone(),
        status,
        until,
    };
    if hits.len() >= script.first && window.is_none() {
        hits.push(hit(StatusCode::OK, None));
        return match script.count {
            Some((remaining, reset)) => (
                [
                    ("x-ratelimit-remaining", remaining.to_string()),
                    ("x-ratelimit-reset", reset.to_string()),
                ],
                "ok",
            )
                .into_response(),
            None => "ok".into_response(),
        };
    }
    let (value, until) = match (window, script.retry_after) {
        (None, RetryAfter::Absent) => {
            hits.push(hit(script.status, None));
            return with_count((script.status, "no").into_response(), script.count);
        }
        // Inside a closed window: the time it has left, in whole seconds rounded up.
        (Some(until), _) => {
            let left = until - at;
            let seconds = left.as_nanos().div_ceil(1_000_000_000) as u64;
            (seconds.to_string(), at + Duration::from_secs(seconds))
        }
        (None, RetryAfter::Seconds(seconds)) => {
            (seconds.to_string(), at + Duration::from_secs(seconds))
        }
        (None, RetryAfter::Date) => {
            let now = SystemTime::now();
            let since_epoch = now.duration_since(SystemTime::UNIX_EPOCH).unwrap();
            let date = SystemTime::UNIX_EPOCH
                + Duration::from_secs((since_epoch + Duration::from_millis(500)).as_secs() + 1);
            let left = date.duration_since(now).unwrap();
            (httpdate::fmt_http_date(date), at + left)
        }
    };
    hits.push(hit(script.status, Some(until)));
    let response = (script.status, [(header::RETRY_AFTER, value)], "slow down").into_response();
    with_count(response, script.count)
}

/// `X-RateLimit-Remaining` and `X-RateLimit-Reset` (delta seconds) on a pushback, if the
/// script says them.
fn with_count(mut response: Response, count: Option<(u64, u64)>) -> Response {
    if let Some((remaining, reset)) = count {
        let headers = response.headers_mut();
        headers.insert("x-ratelimit-remaining", remaining.into());
        headers.insert("x-ratelimit-reset", reset.into());
    }
    response
}

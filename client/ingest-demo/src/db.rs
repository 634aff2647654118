//! The mock database: `PUT /docs/{id}` writes a record for [`RU_PER_WRITE`] and
//! `GET /query/{id}` answers a query for [`RU_PER_QUERY`], both out of one bucket it keeps
//! itself; above it a 429 with `Retry-After` and `x-ms-retry-after-ms`. A record already stored
//! is a duplicate (200, not stored again). It logs every call.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use axum::Router;
use demo_support::bucket::{retry_after_seconds, Bucket};
use demo_support::mock_server::{lock, LoopbackServer};

/// What one write costs, in request units.
pub const RU_PER_WRITE: u64 = 10;
/// What one interactive query costs, in request units.
pub const RU_PER_QUERY: u64 = 10;
/// Which try of a record this is (phase 1), or how many times the backlog delivered it.
pub const ATTEMPT_HEADER: &str = "x-attempt";
/// The retry-after in milliseconds, rounded up (`Retry-After` only has whole seconds).
pub const RETRY_AFTER_MS_HEADER: &str = "x-ms-retry-after-ms";

/// How a write ended, in the order the chart stacks them (`verdict as usize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Stored,
    Duplicate,
    Refused,
    /// A query answered (200).
    Answered,
}

/// One write as the database saw it.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub at: Instant,
    pub verdict: Verdict,
    /// The caller's `x-attempt` (1 if absent).
    pub attempt: u32,
    /// An interactive query, not a write.
    pub query: bool,
}

struct Shared {
    epoch: Instant,
    bucket: Bucket,
    stored: HashSet<String>,
    log: Vec<Arrival>,
}

type SharedState = Arc<Mutex<Shared>>;

/// A running mock database on a loopback port. Dropping it stops the server.
pub struct Database {
    server: LoopbackServer,
    shared: SharedState,
}

impl Database {
    /// Starts on 127.0.0.1 with a free port, provisioned for `capacity` RU of burst refilling
    /// at `rate` RU/s.
    pub async fn start(capacity: u64, rate: u64) -> std::io::Result<Database> {
        let shared = Arc::new(Mutex::new(Shared {
            epoch: Instant::now(),
            bucket: Bucket::new(capacity, rate),
            stored: HashSet::new(),
            log: Vec::new(),
        }));
        let app = Router::new()
            .route("/docs/{id}", put(write))
            .route("/query/{id}", get(query))
            // Free and not logged: workers open their connections with it.
            .route("/health", get(|| async { "ok" }))
            .with_state(Arc::clone(&shared));
        let server = LoopbackServer::start(app, "ingest-demo: mock database").await?;
        Ok(Database { server, shared })
    }

    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The writes seen since the last call, in arrival order; the log starts empty again.
    pub fn take_log(&self) -> Vec<Arrival> {
        std::mem::take(&mut lock(&self.shared).log)
    }

    /// Records stored so far (each id once).
    pub fn stored_count(&self) -> usize {
        lock(&self.shared).stored.len()
    }

    /// The ids stored so far, and the store emptied for the next phase.
    pub fn take_stored(&self) -> HashSet<String> {
        std::mem::take(&mut lock(&self.shared).stored)
    }

    /// How long until the bucket is full again.
    pub fn full_in(&self) -> Duration {
        let shared = lock(&self.shared);
        shared.bucket.full_in(shared.epoch.elapsed())
    }

    /// Stops accepting, lets writes in flight finish (bounded), and returns.
    pub async fn stop(self) {
        self.server.stop().await;
    }
}

async fn write(
    State(shared): State<SharedState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let attempt = headers
        .get(ATTEMPT_HEADER)
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(1);
    // A write costs its RU whether or not the record was there already: the database does
    // the work of finding out.
    let verdict = charge(&shared, RU_PER_WRITE, attempt, false, |state| {
        if state.stored.insert(id) {
            Verdict::Stored
        } else {
            Verdict::Duplicate
        }
    });
    match verdict {
        Ok(Verdict::Stored) => (StatusCode::CREATED, "stored\n").into_response(),
        Ok(_) => (StatusCode::OK, "duplicate: already stored\n").into_response(),
        Err(wait) => too_many(wait),
    }
}

/// An interactive query: its RU from the same bucket as the writes.
async fn query(State(shared): State<SharedState>, Path(_id): Path<String>) -> Response {
    match charge(&shared, RU_PER_QUERY, 1, true, |_| Verdict::Answered) {
        Ok(_) => (StatusCode::OK, "answered\n").into_response(),
        Err(wait) => too_many(wait),
    }
}

/// Takes `ru` from the bucket and, if they were there, does the work (`served`); logs the
/// verdict either way. `Err`: how long until the RU are there.
fn charge(
    shared: &SharedState,
    ru: u64,
    attempt: u32,
    query: bool,
    served: impl FnOnce(&mut Shared) -> Verdict,
) -> Result<Verdict, Duration> {
    let mut guard = lock(shared);
    let state = &mut *guard;
    // Read under the lock, so the bucket sees instants in order.
    let at = Instant::now();
    let verdict = state
        .bucket
        .take(ru, at - state.epoch)
        .map(|()| served(state));
    state.log.push(Arrival {
        at,
        verdict: verdict.unwrap_or(Verdict::Refused),
        attempt,
        query,
    });
    verdict
}

/// 429 with the wait rounded up, so a client that obeys is never early.
fn too_many(wait: Duration) -> Response {
    let secs = retry_after_seconds(wait);
    let ms = wait.as_nanos().div_ceil(1_000_000).max(1);
    (
        StatusCode::TOO_MANY_REQUESTS,
        [
            ("retry-after", secs.to_string()),
            (RETRY_AFTER_MS_HEADER, ms.to_string()),
        ],
        "request rate too large\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn put_doc(url: &str, attempt: u32) -> reqwest::Response {
        reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .put(url)
            .header(ATTEMPT_HEADER, attempt.to_string())
            .send()
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn stores_once_ignores_a_duplicate_and_refuses_above_the_bucket() {
        let db = Database::start(20, 1).await.unwrap();
        let url = |id: &str| format!("{}/docs/{id}", db.url());
        assert_eq!(put_doc(&url("a"), 1).await.status(), 201);
        assert_eq!(put_doc(&url("a"), 2).await.status(), 200);
        let refused = put_doc(&url("b"), 1).await;
        assert_eq!(refused.status(), 429);
        assert_eq!(refused.headers()["retry-after"], "10");
        let ms: u64 = refused.headers()[RETRY_AFTER_MS_HEADER]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((9_000..=10_000).contains(&ms), "{ms}");
        let log = db.take_log();
        let verdicts: Vec<_> = log.iter().map(|a| (a.verdict, a.attempt)).collect();
        assert_eq!(
            verdicts,
            [
                (Verdict::Stored, 1),
                (Verdict::Duplicate, 2),
                (Verdict::Refused, 1)
            ]
        );
        assert_eq!(db.stored_count(), 1);
        db.stop().await;
    }

    #[tokio::test]
    async fn a_query_takes_from_the_writes_bucket() {
        let db = Database::start(20, 1).await.unwrap();
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let query = |id: &str| client.get(format!("{}/query/{id}", db.url())).send();
        assert_eq!(query("q1").await.unwrap().status(), 200);
        assert_eq!(
            put_doc(&format!("{}/docs/a", db.url()), 1).await.status(),
            201
        );
        assert_eq!(query("q2").await.unwrap().status(), 429);
        let log = db.take_log();
        let seen: Vec<_> = log.iter().map(|a| (a.verdict, a.query)).collect();
        assert_eq!(
            seen,
            [
                (Verdict::Answered, true),
                (Verdict::Stored, false),
                (Verdict::Refused, true)
            ]
        );
        // A query stores nothing.
        assert_eq!(db.stored_count(), 1);
        db.stop().await;
    }
}

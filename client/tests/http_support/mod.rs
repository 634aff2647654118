//! What the tower and reqwest tests share: the bound on each test, the server, supplier and
//! limiter most tests start with, the supplier scripts both run, and the error both layers
//! return when Redis is gone.

use std::future::Future;
use std::time::Duration;

use axum::http::StatusCode;
use redis::aio::MultiplexedConnection;
use redis_throttle::http::LimiterError;
use redis_throttle::{Limiter, Quota};
use throttle_e2e::http_supplier::{RetryAfter, Script, Supplier};
use throttle_e2e::multiplexed;
use throttle_testkit::{Flavor, Server};

/// Every test ends within this.
pub const LIMIT: Duration = Duration::from_secs(30);

pub async fn bounded<T>(test: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, test)
        .await
        .expect("the test took too long")
}

/// A limiter on `key` of 5 at once, then 20 per second.
pub async fn limiter(server: &Server, key: &str) -> Limiter<MultiplexedConnection> {
    Limiter::new(
        multiplexed(&server.url()).await,
        key,
        Quota::new(5, 20u64).unwrap(),
    )
}

/// A Redis 8.2 with the module, a supplier that follows `script`, and a limiter on `key`.
pub async fn start(
    script: Script,
    key: &str,
) -> (Server, Supplier, Limiter<MultiplexedConnection>) {
    let server = Server::start(Flavor::Redis82);
    let supplier = Supplier::start(script).await;
    let limiter = limiter(&server, key).await;
    (server, supplier, limiter)
}

/// GitHub's secondary rate limit: 403 with `Retry-After: 1`, once.
pub fn rate_limit_403() -> Script {
    Script {
        status: StatusCode::FORBIDDEN,
        ..Script::once()
    }
}

/// Forbidden, always, and nothing says it is a rate limit.
pub fn plain_403() -> Script {
    Script {
        status: StatusCode::FORBIDDEN,
        retry_after: RetryAfter::Absent,
        first: usize::MAX,
        ..Script::once()
    }
}

/// What a layer returns when the limiter `name` cannot reach Redis: a [`LimiterError`] that
/// names the limiter, with the connection error as its cause, and whose message (`message`:
/// the layer's error as text) says no token was taken before sending.
#[track_caller]
pub fn assert_redis_gone(limiter_err: &LimiterError, message: &str, name: &str) {
    assert_eq!(limiter_err.name(), name);
    assert!(
        matches!(limiter_err.error(), redis_throttle::Error::Connection(_)),
        "{limiter_err:?}"
    );
    let says =
        format!("redis-throttle could not take a token before sending on limiter \"{name}\"");
    assert!(message.starts_with(&says), "{message}");
}

//! Connection trouble: no server, a server that never answers, a server restarted in the
//! middle of a run.

use redis_throttle::prelude::*;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis_throttle::{Error, Limiter, Quota};
use throttle_testkit::{Flavor, Server};
use tokio::time::Instant;

const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
const RETRIES: usize = 1;
const MAX_DELAY: Duration = Duration::from_millis(100);

/// A lazy ConnectionManager (it connects at the first call, as a service that starts
/// before Redis would), with short timeouts and one retry.
fn lazy_manager(url: &str) -> ConnectionManager {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CONNECT_TIMEOUT))
        .set_response_timeout(Some(CONNECT_TIMEOUT))
        .set_number_of_retries(RETRIES)
        .set_min_delay(Duration::from_millis(10))
        .set_max_delay(MAX_DELAY);
    ConnectionManager::new_lazy_with_config(redis::Client::open(url).unwrap(), config).unwrap()
}

/// Every connection attempt may take the whole timeout, plus the backoff between them,
/// plus slack for a loaded machine.
fn error_bound() -> Duration {
    CONNECT_TIMEOUT * (RETRIES as u32 + 1) + MAX_DELAY * RETRIES as u32 + Duration::from_secs(2)
}

fn quota() -> Quota {
    Quota::new(10, 100u64).unwrap()
}

#[tokio::test]
async fn no_server_is_a_clear_connection_error_within_the_timeout() {
    // A loopback port that nothing listens on.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let limiter = Limiter::new(
        lazy_manager(&format!("redis://127.0.0.1:{port}")),
        "k",
        quota(),
    );

    let start = Instant::now();
    let result = limiter.acquire().await;
    let took = start.elapsed();
    let err = match result {
        Err(err @ Error::Connection(_)) => err,
        other => panic!("{other:?}"),
    };
    let message = err.to_string();
    println!("no server: {message} (after {took:?})");
    assert!(
        message.starts_with("redis connection or server error"),
        "{message}"
    );
    assert!(message.to_lowercase().contains("refused"), "{message}");
    assert!(took < error_bound(), "took {took:?}");
    assert_eq!(limiter.metrics().errors, 1);
}

#[tokio::test]
async fn a_silent_server_is_a_connection_error_within_the_timeout() {
    // Accepts TCP connections (the kernel does, from the backlog) but never answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "redis://127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    );
    let limiter = Limiter::new(lazy_manager(&url), "k", quota());

    let start = Instant::now();
    let result = limiter.acquire().await;
    let took = start.elapsed();
    match &result {
        Err(Error::Connection(e)) => println!("silent server: {e} (after {took:?})"),
        other => panic!("{other:?}"),
    }
    assert!(
        took >= CONNECT_TIMEOUT,
        "gave up before the timeout: {took:?}"
    );
    assert!(took < error_bound(), "took {took:?}");
    drop(listener);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limiter_recovers_from_a_server_restart_without_being_rebuilt() {
    let mut server = Server::start(Flavor::Redis82);
    let limiter = Limiter::new(lazy_manager(&server.url()), "restart:bucket", quota());
    limiter.acquire().await.expect("before the restart");

    // A run in the background: one acquire every 20 ms, for at most 30 s.
    let stop = Arc::new(AtomicBool::new(false));
    let run = {
        let limiter = limiter.clone();
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let mut outcomes = Vec::new();
            let until = Instant::now() + Duration::from_secs(30);
            while !stop.load(Ordering::Relaxed) && Instant::now() < until {
                let result = tokio::time::timeout(Duration::from_secs(5), limiter.acquire()).await;
                outcomes.push(match result {
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => Err(e),
                    Err(_) => panic!("an acquire hung for 5 s"),
                });
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            outcomes
        })
    };

    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::task::block_in_place(|| server.kill());
    tokio::time::sleep(Duration::from_millis(500)).await;
    tokio::task::block_in_place(|| server.restart());

    // The same limiter gets tokens again within a bounded time.
    let restarted = Instant::now();
    let mut recovered = false;
    for _ in 0..100 {
        if limiter.acquire().await.is_ok() {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        recovered,
        "no grant within {:?} of the restart",
        restarted.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.store(true, Ordering::Relaxed);
    let outcomes = run.await.unwrap();

    let errors: Vec<&Error> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    let first_error = outcomes.iter().position(Result::is_err);
    let last_error = outcomes.iter().rposition(Result::is_err);
    println!(
        "restart: {} calls in the background run, {} failed while the server was down, recovered \
         {:?} after the restart",
        outcomes.len(),
        errors.len(),
        restarted.elapsed()
    );
    assert!(
        !errors.is_empty(),
        "the run never noticed the server was down"
    );
    for error in &errors {
        assert!(matches!(error, Error::Connection(_)), "{error:?}");
    }
    assert!(outcomes[..first_error.unwrap()].iter().all(Result::is_ok));
    assert!(
        outcomes[last_error.unwrap() + 1..]
            .iter()
            .any(Result::is_ok),
        "the background run did not recover"
    );
}

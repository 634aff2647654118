//! One replica of the bank's service, in a process of its own: it opens its connections,
//! says it is ready, waits for the shared start instant, fires all its PIX status queries
//! at once (through the shared bucket in phase 2), and reports each one as a JSON line.
//!
//! In phase 2 the supplier's word wins: a 429 pauses the shared bucket for its
//! `Retry-After` (`THROTTLE.PAUSE`: the whole fleet stops, not just this replica), and the
//! call takes a token again and is sent again, at most [`MAX_ATTEMPTS`] times in all.
//! Phase 1 shows what happens without the limiter: one send per call, no retry.

use std::process::ExitCode;
use std::time::Duration;

use demo_support::child::{self, say, FromDemo};
use demo_support::shared_start::micros;
use redis_throttle::redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis_throttle::{Limiter, Quota, Rate};
use tokio::time::{timeout, Instant};

use crate::cli::{Phase, ReplicaArgs, MAX_ATTEMPTS};
use crate::upstream::INTEGRATOR_HEADER;
use crate::wire::{call_id, Attempt, CallRecord, PauseRecord, ReplicaMessage, ReplicaStats};

/// Bound on one HTTP call, connection included.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound on connecting to Redis and on each Redis reply.
const REDIS_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the replica waits for the demo to send the start instant.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The pause when a 429 carries no `Retry-After` the replica can read.
const DEFAULT_PAUSE: Duration = Duration::from_secs(1);

pub fn main(args: ReplicaArgs) -> ExitCode {
    child::run(&format!("pix-demo replica {}", args.index), run(&args))
}

async fn run(args: &ReplicaArgs) -> Result<(), String> {
    let limiter = match args.phase {
        Phase::Direct => None,
        Phase::Bucket => Some(limiter(args).await?),
    };
    let url = format!("{}/pix", args.upstream.trim_end_matches('/'));
    // One keep-alive connection per call, opened now, so no TCP handshake lands in the
    // timed part and every call starts from the same place.
    let mut clients = Vec::with_capacity(args.calls as usize);
    for _ in 0..args.calls {
        clients.push(warm_client(&args.upstream).await?);
    }

    let mut from_demo = FromDemo::listen("pix-demo replica");
    say(&ReplicaMessage::Ready)?;
    let start_at = from_demo.start(START_TIMEOUT).await?;

    let max_wait = Duration::from_millis(args.max_wait_ms);
    let mut tasks = Vec::with_capacity(clients.len());
    for (call, client) in (0..args.calls).zip(clients) {
        let id = call_id(args.index, call);
        let call_url = format!("{url}/{id}/status");
        tasks.push(tokio::spawn(one_call(
            Call {
                replica: args.index,
                call,
                url: call_url,
                integrator: args.integrator.clone(),
                max_wait,
            },
            start_at,
            client,
            limiter.clone(),
        )));
    }
    // Reported after the last call, so no printing happens while calls are timed.
    let mut records = Vec::with_capacity(tasks.len());
    for task in tasks {
        records.push(task.await.map_err(|e| format!("a call task failed: {e}"))?);
    }
    for record in records {
        say(&ReplicaMessage::Call(record))?;
    }
    let mut stats = ReplicaStats {
        replica: args.index,
        ..ReplicaStats::default()
    };
    if let Some(limiter) = &limiter {
        let metrics = limiter.metrics();
        stats.backend = Some(limiter.backend().name().to_owned());
        stats.granted = metrics.granted;
        stats.pauses = metrics.pauses;
        stats.tokens_given_back = metrics.tokens_given_back;
        stats.round_trips = metrics.round_trips;
    }
    say(&ReplicaMessage::Done(stats))
}

/// The shared bucket, checked once (the backend answers, the quota is valid) before the
/// start. With `auto` that first call is also the probe that settles module or script.
async fn limiter(args: &ReplicaArgs) -> Result<Limiter<ConnectionManager>, String> {
    let (Some(url), Some(key)) = (&args.redis_url, &args.key) else {
        return Err("phase 2 needs --redis-url and --key".to_owned());
    };
    let quota = Quota::new(args.capacity, Rate::from_f64(args.rate)).map_err(|e| e.to_string())?;
    let client = redis_throttle::redis::Client::open(url.as_str())
        .map_err(|e| format!("bad Redis URL {url}: {e}"))?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(REDIS_TIMEOUT))
        .set_response_timeout(Some(REDIS_TIMEOUT))
        .set_number_of_retries(2);
    let conn = timeout(
        REDIS_TIMEOUT * 2,
        ConnectionManager::new_with_config(client, config),
    )
    .await
    .map_err(|_| format!("no connection to {url} within {:?}", REDIS_TIMEOUT * 2))?
    .map_err(|e| format!("cannot connect to {url}: {e}"))?;
    let limiter = Limiter::builder(key.as_str(), quota)
        .strategy(args.strategy.to_strategy())
        .backend(args.backend.to_backend())
        .name("pix-status")
        .build(conn)
        .map_err(|e| e.to_string())?;
    // PEEK writes nothing: a dry run that fails here, not mid-scenario (a module backend
    // without the module, a script the server refuses).
    limiter.peek().await.map_err(|e| e.to_string())?;
    Ok(limiter)
}

async fn warm_client(upstream: &str) -> Result<reqwest::Client, String> {
    let client = reqwest::Client::builder()
        // Loopback only: a proxy from the environment must not get in between.
        .no_proxy()
        .timeout(HTTP_TIMEOUT)
        .connect_timeout(HTTP_TIMEOUT)
        .pool_max_idle_per_host(1)
        .build()
        .map_err(|e| format!("HTTP client: {e}"))?;
    let health = format!("{}/health", upstream.trim_end_matches('/'));
    let response = client
        .get(&health)
        .send()
        .await
        .map_err(|e| format!("cannot reach the upstream at {health}: {e}"))?;
    // Reading the body to the end puts the connection back in the pool for the real call.
    response
        .bytes()
        .await
        .map_err(|e| format!("upstream {health}: {e}"))?;
    Ok(client)
}

struct Call {
    replica: u32,
    call: u32,
    url: String,
    integrator: String,
    max_wait: Duration,
}

async fn one_call(
    call: Call,
    start_at: Instant,
    client: reqwest::Client,
    limiter: Option<Limiter<ConnectionManager>>,
) -> CallRecord {
    tokio::time::sleep_until(start_at).await;
    let began = Instant::now();
    let mut record = CallRecord {
        replica: call.replica,
        call: call.call,
        start_us: micros(began.saturating_duration_since(start_at)),
        wait_us: 0,
        sent_us: 0,
        status: 0,
        round_trips: 0,
        error: None,
        attempts: Vec::new(),
    };
    // Direct: one send, whatever the answer (what happens without the limiter).
    let attempts = if limiter.is_some() { MAX_ATTEMPTS } else { 1 };
    for _ in 0..attempts {
        let asked = Instant::now();
        if let Some(limiter) = &limiter {
            // The limiter's own deadline refuses a longer wait without taking a token; the
            // outer timeout also bounds the round trips.
            let left = call.max_wait.saturating_sub(began.elapsed());
            let got = timeout(left + REDIS_TIMEOUT, limiter.acquire_within(left)).await;
            record.wait_us += micros(asked.elapsed());
            match got {
                Ok(Ok(grant)) => record.round_trips += grant.round_trips,
                Ok(Err(err)) => {
                    record.error = Some(format!("no token: {err}"));
                    return record;
                }
                Err(_) => {
                    record.error = Some(format!("no token within {:?}", left + REDIS_TIMEOUT));
                    return record;
                }
            }
        }
        let sent = Instant::now();
        let mut this = Attempt {
            wait_us: micros(sent.saturating_duration_since(asked)),
            sent_us: micros(sent.saturating_duration_since(start_at)),
            status: 0,
            retry_after_s: None,
            pause: None,
        };
        record.sent_us = this.sent_us;
        let response = client
            .get(&call.url)
            .header(INTEGRATOR_HEADER, &call.integrator)
            .send()
            .await;
        match response {
            Ok(response) => {
                this.status = response.status().as_u16();
                this.retry_after_s = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse().ok());
                let _ = response.bytes().await;
            }
            Err(err) => record.error = Some(format!("HTTP: {err}")),
        }
        record.status = this.status;
        let refused = this.status == 429;
        if let (true, Some(limiter)) = (refused, &limiter) {
            // The supplier's word stops the whole fleet, also on the last attempt.
            let asked_for = this
                .retry_after_s
                .map_or(DEFAULT_PAUSE, Duration::from_secs);
            let at = Instant::now();
            let paused = timeout(REDIS_TIMEOUT, limiter.pause(asked_for)).await;
            this.pause = Some(PauseRecord {
                at_us: micros(at.saturating_duration_since(start_at)),
                asked_ms: u64::try_from(asked_for.as_millis()).unwrap_or(u64::MAX),
                next_token_ms: match &paused {
                    Ok(Ok(next)) => Some(u64::try_from(next.as_millis()).unwrap_or(u64::MAX)),
                    _ => None,
                },
                error: match paused {
                    Ok(Ok(_)) => None,
                    Ok(Err(err)) => Some(err.to_string()),
                    Err(_) => Some(format!("no answer within {REDIS_TIMEOUT:?}")),
                },
            });
        }
        record.attempts.push(this);
        if !refused || record.error.is_some() {
            break;
        }
    }
    record
}

//! One replica of the bank's service, in a process of its own: it opens its connections,
//! says it is ready, waits for the shared start instant, fires all its PIX status queries
//! at once (through the shared bucket in phase 2), and reports each one as a JSON line.
//!
//! In phase 2 the supplier's word wins, as the library's HTTP layers pass it on (done here by
//! hand, so that every send is timed and recorded): a 429 pauses the shared bucket for its
//! `Retry-After` (1 s without one) and cuts its rate to 0.7, climbing back over the recovery
//! time (`THROTTLE.CUT`; `--no-cut`: `THROTTLE.PAUSE` only), so the whole fleet stops and
//! slows down, not just this replica; the supplier's own count in its rate-limit headers
//! lowers the bucket (`THROTTLE.SYNC`); and the call takes a token again and is sent again,
//! at most [`MAX_ATTEMPTS`] times in all. A reserved call looks at the bucket after its sleep
//! (the limiter's pause check; `--no-pause-check`: it does not) and waits out a pause another
//! replica set meanwhile. Phase 1 shows what happens without the limiter: one send per call,
//! no retry.
//!
//! With a duration, the replica keeps `workers` calls going, one after another, until it
//! runs out: a sustained load instead of one burst.

use redis_throttle::prelude::*;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use demo_support::child::{self, say, ChildArgs, FromDemo};
use demo_support::redis_server::connect_async;
use demo_support::shared_start::micros;
use redis_throttle::http::{read_supplier_count, RetryPolicy};
use redis_throttle::redis::aio::ConnectionManager;
use redis_throttle::report::FleetReport;
use redis_throttle::{Announcements, Limiter, Quota, Rate};
use tokio::time::{timeout, Instant};

use crate::cli::{Phase, MAX_ATTEMPTS};
use crate::fleet::Plan;
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

pub fn main(args: ChildArgs) -> ExitCode {
    child::run(&format!("pix-demo replica {}", args.index), async {
        run(args.index, &args.plan::<Plan>()?).await
    })
}

async fn run(index: u32, args: &Plan) -> Result<(), String> {
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

    let max_wait = args.max_wait;
    let policy = if args.no_cut {
        RetryPolicy::default().no_cut()
    } else {
        RetryPolicy::default().cut_rate(0.7, args.cut_recovery)
    };
    let mut tasks = Vec::with_capacity(clients.len());
    let calls = Calls {
        replica: index,
        url,
        integrator: args.integrator.clone(),
        max_wait,
        policy,
    };
    match args.duration {
        None => {
            for (n, client) in (0..args.calls).zip(clients) {
                let (call, limiter) = (calls.call(n), limiter.clone());
                tasks.push(tokio::spawn(async move {
                    vec![one_call(call, start_at, client, limiter).await]
                }));
            }
        }
        Some(duration) => {
            let until = start_at + duration;
            let next = Arc::new(AtomicU32::new(0));
            for client in clients {
                let (next, limiter, calls) = (Arc::clone(&next), limiter.clone(), calls.clone());
                tasks.push(tokio::spawn(async move {
                    let mut records = Vec::new();
                    tokio::time::sleep_until(start_at).await;
                    while Instant::now() < until {
                        let call = calls.call(next.fetch_add(1, Ordering::Relaxed));
                        records
                            .push(one_call(call, start_at, client.clone(), limiter.clone()).await);
                    }
                    records
                }));
            }
        }
    }
    // Reported after the last call, so no printing happens while calls are timed.
    let mut records = Vec::with_capacity(tasks.len());
    for task in tasks {
        records.extend(task.await.map_err(|e| format!("a call task failed: {e}"))?);
    }
    for record in records {
        say(&ReplicaMessage::Call(record))?;
    }
    let mut stats = ReplicaStats {
        replica: index,
        ..ReplicaStats::default()
    };
    if let Some(limiter) = &limiter {
        let metrics = limiter.metrics();
        stats.backend = Some(limiter.backend().name().to_owned());
        stats.granted = metrics.granted;
        stats.pauses = metrics.pauses;
        stats.tokens_given_back = metrics.tokens_given_back;
        stats.round_trips = metrics.round_trips;
        let pushback = &metrics.pushback;
        stats.cuts = pushback.cuts;
        stats.cuts_same_episode = pushback.cuts_same_episode;
        stats.syncs = pushback.syncs;
        stats.syncs_unchanged = pushback.syncs_unchanged;
        stats.held_by_pause = pushback.held_by_pause;
        stats.pauses_unchanged = pushback.pauses_unchanged;
        stats.slot_waits = metrics.in_flight.waits;
        stats.leases_lost = metrics.in_flight.leases_lost;
    }
    say(&ReplicaMessage::Done(stats))
}

/// The shared bucket, checked once (the backend answers, the quota is valid) before the
/// start. With `auto` that first call is also the probe that settles module or script.
async fn limiter(args: &Plan) -> Result<Limiter<ConnectionManager>, String> {
    let (url, key) = (&args.redis_url, &args.key);
    let quota = Quota::new(args.capacity, Rate::from_f64(args.rate)).map_err(|e| e.to_string())?;
    let conn = connect_async(url).await?;
    // The replica's counters in Redis for the operator's tool (`throttle-ctl status`), every
    // second: the run is short. Off the call path, on a connection of its own.
    let fleet =
        FleetReport::every(conn.clone(), Duration::from_secs(1)).map_err(|e| e.to_string())?;
    let mut builder = Limiter::builder(key.as_str(), quota)
        .report(&fleet)
        .strategy(args.strategy.to_strategy())
        .backend(args.backend.to_backend())
        .name("pix-status")
        .pause_check(!args.no_pause_check);
    if let Some(cap) = args.max_in_flight {
        builder = builder.max_in_flight(cap);
    }
    if !args.no_listen {
        // The replica's one subscription; until it is up its calls ask, so waiting for it
        // only makes the run's round trips the ones of a process that has been up a while.
        let client =
            redis_throttle::redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
        let announcements = Announcements::new(client).map_err(|e| e.to_string())?;
        if !announcements.ready(REDIS_TIMEOUT * 2).await {
            return Err(format!(
                "no subscription to the pause announcements on {url} within {:?} \
                 (--no-listen asks the bucket instead)",
                REDIS_TIMEOUT * 2
            ));
        }
        builder = builder.listen(&announcements);
    }
    let limiter = builder.build(conn).map_err(|e| e.to_string())?;
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

/// What every call of this replica shares.
#[derive(Clone)]
struct Calls {
    replica: u32,
    /// The upstream's `/pix`.
    url: String,
    integrator: String,
    max_wait: Duration,
    policy: RetryPolicy,
}

impl Calls {
    fn call(&self, call: u32) -> Call {
        Call {
            replica: self.replica,
            call,
            url: format!("{}/{}/status", self.url, call_id(self.replica, call)),
            integrator: self.integrator.clone(),
            max_wait: self.max_wait,
            policy: self.policy,
        }
    }
}

struct Call {
    replica: u32,
    call: u32,
    url: String,
    integrator: String,
    max_wait: Duration,
    policy: RetryPolicy,
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
        slept_us: 0,
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
        // Tokens left in the bucket after this take: a supplier's count at or above it
        // cannot lower the bucket, so it costs no round trip (as the HTTP layers do).
        let mut left_after_take = u64::MAX;
        // The grant lives until the answer is read: with a cap on calls in flight it holds
        // the call's slot, and the next call may have it only once this one is done.
        let mut grant = None;
        if let Some(limiter) = &limiter {
            // The limiter's own deadline refuses a longer wait without taking a token; the
            // outer timeout also bounds the round trips.
            let left = call.max_wait.saturating_sub(began.elapsed());
            let got = timeout(
                left + REDIS_TIMEOUT,
                limiter.acquire_with(Demand::call().within(left)),
            )
            .await;
            record.wait_us += micros(asked.elapsed());
            match got {
                Ok(Ok(granted)) => {
                    record.round_trips += granted.round_trips;
                    record.slept_us += micros(granted.slept);
                    left_after_take = granted.remaining;
                    grant = Some(granted);
                }
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
            cut: None,
            synced: None,
        };
        record.sent_us = this.sent_us;
        let response = client
            .get(&call.url)
            .header(INTEGRATOR_HEADER, &call.integrator)
            .send()
            .await;
        let mut count = redis_throttle::SupplierCount::default();
        match response {
            Ok(response) => {
                this.status = response.status().as_u16();
                this.retry_after_s = response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse().ok());
                if call.policy.syncs_with_supplier() {
                    count = read_supplier_count(response.headers(), SystemTime::now());
                }
                let _ = response.bytes().await;
            }
            Err(err) => record.error = Some(format!("HTTP: {err}")),
        }
        // The call is over: its slot, if it holds one, goes back.
        drop(grant);
        record.status = this.status;
        let refused = this.status == 429;
        if let (true, Some(limiter)) = (refused, &limiter) {
            // The supplier's word stops (and slows) the whole fleet, also on the last attempt.
            let asked_for = this
                .retry_after_s
                .map(Duration::from_secs)
                .or(count.retry_after)
                .unwrap_or(DEFAULT_PAUSE);
            let at = Instant::now();
            let paused = match call.policy.cut_for(asked_for) {
                Some(cut) => timeout(REDIS_TIMEOUT, limiter.cut(cut)).await.map(|r| {
                    r.map(|report| {
                        this.cut = Some(report.cut);
                        report.next
                    })
                }),
                None => timeout(REDIS_TIMEOUT, limiter.pause(asked_for)).await,
            };
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
        if let Some(limiter) = &limiter {
            // The supplier's count, when it says less is left than the bucket holds, or
            // nothing with a reset: the bucket comes down to it. After the cut, as the HTTP
            // layers do: a count of 0 first would pause the episode and the cut not cut.
            let says_less = count
                .requests
                .is_some_and(|r| r.left < left_after_take || (r.left == 0 && !r.reset.is_zero()));
            if says_less {
                if let Ok(Ok(changed)) = timeout(REDIS_TIMEOUT, limiter.sync(count)).await {
                    this.synced = Some(changed);
                }
            }
        }
        record.attempts.push(this);
        if !refused || record.error.is_some() {
            break;
        }
    }
    record
}

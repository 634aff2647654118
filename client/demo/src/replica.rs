//! One replica of the bank's service, in a process of its own: it opens its connections,
//! says it is ready, waits for the shared start instant, fires its PIX status queries (through
//! the shared bucket in phase 2; with a duration, `workers` calls going one after another),
//! and reports each one as a JSON line. In phase 2 a 429 pauses and cuts the shared bucket
//! and the supplier's count syncs it, as the library's HTTP layers do (by hand here, so that
//! every send is timed); docs/demos.md tells the story.

use redis_throttle::prelude::*;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use demo_support::child::{self, say, ChildArgs, FromDemo};
use demo_support::http::warm_client;
use demo_support::limiter::checked_limiter;
use demo_support::shared_start::micros;
use redis_throttle::http::{parse_retry_after, read_supplier_count, RetryPolicy};
use redis_throttle::redis::aio::ConnectionManager;
use redis_throttle::{Limiter, Quota, Rate};
use tokio::time::{timeout, Instant};

use crate::cli::{Phase, MAX_ATTEMPTS};
use crate::fleet::Plan;
use crate::upstream::INTEGRATOR_HEADER;
use crate::wire::{call_id, CallRecord, LimiterCounts, ReplicaMessage, ReplicaStats};

/// Bound on connecting to Redis and on each Redis reply.
const REDIS_TIMEOUT: Duration = Duration::from_secs(5);
/// The pause when a 429 carries no `Retry-After` the replica can read.
const DEFAULT_PAUSE: Duration = Duration::from_secs(1);

pub fn main(args: ChildArgs) -> ExitCode {
    child::run(&format!("pix-demo replica {}", args.index), async {
        run(args.index, &args.plan::<Plan>()?).await
    })
}

/// What every call of this replica shares.
struct Calls {
    replica: u32,
    /// The upstream's `/pix`.
    url: String,
    integrator: String,
    start_at: Instant,
    max_wait: Duration,
    policy: RetryPolicy,
    limiter: Option<Limiter<ConnectionManager>>,
    /// The next call's number.
    next: AtomicU32,
}

async fn run(index: u32, plan: &Plan) -> Result<(), String> {
    let args = &plan.args;
    let limiter = match plan.phase {
        Phase::Direct => None,
        Phase::Bucket => Some(limiter(plan).await?),
    };
    // One keep-alive connection per call, opened now, so no TCP handshake lands in the
    // timed part and every call starts from the same place.
    let mut clients = Vec::new();
    for _ in 0..args.calls_per_replica() {
        clients.push(warm_client(&plan.upstream, "the upstream", 1).await?);
    }
    let mut from_demo = FromDemo::listen("pix-demo replica");
    child::say_ready()?;
    let start_at = from_demo.start().await?;
    let calls = Arc::new(Calls {
        replica: index,
        url: format!("{}/pix", plan.upstream.trim_end_matches('/')),
        integrator: plan.integrator.clone(),
        start_at,
        max_wait: plan.max_wait,
        policy: match args.no_cut {
            true => RetryPolicy::default().no_cut(),
            false => {
                RetryPolicy::default().cut_rate(0.7, Duration::from_secs_f64(args.cut_recovery))
            }
        },
        limiter: limiter.clone(),
        next: AtomicU32::new(0),
    });
    // A call per connection at once; with a duration, each connection's calls one after
    // another until it is over.
    let until = args.run_for().map(|d| start_at + d);
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|client| {
            let calls = Arc::clone(&calls);
            tokio::spawn(async move {
                let mut records = Vec::new();
                loop {
                    records.push(calls.one(&client).await);
                    if until.is_none_or(|until| Instant::now() >= until) {
                        return records;
                    }
                }
            })
        })
        .collect();
    // Reported after the last call, so no printing happens while calls are timed.
    let mut records = Vec::new();
    for task in tasks {
        records.extend(task.await.map_err(|e| format!("a call task failed: {e}"))?);
    }
    for record in records {
        say(&ReplicaMessage::Call(record))?;
    }
    say(&ReplicaMessage::Done(ReplicaStats {
        replica: index,
        backend: limiter.as_ref().map(|l| l.backend().name().to_owned()),
        counts: limiter
            .as_ref()
            .map_or_else(LimiterCounts::default, |l| LimiterCounts::of(&l.metrics())),
    }))
}

/// The shared bucket, checked before the start. With `auto` that first call is also the
/// probe that settles module or script.
async fn limiter(plan: &Plan) -> Result<Limiter<ConnectionManager>, String> {
    let args = &plan.args;
    let quota = Quota::new(args.capacity, Rate::from_f64(args.rate)).map_err(|e| e.to_string())?;
    let mut builder = Limiter::builder(plan.key.as_str(), quota)
        .strategy(args.strategy().to_strategy())
        .backend(args.backend.to_backend())
        .name("pix-status")
        .pause_check(!args.no_pause_check);
    if let Some(cap) = args.max_in_flight() {
        builder = builder.max_in_flight(cap);
    }
    let listen = (!args.no_listen).then_some(" (--no-listen asks the bucket instead)");
    checked_limiter(&plan.redis_url, builder, listen).await
}

impl Calls {
    /// The next call: its token (bucket phase), its sends, and what each 429 asks of the
    /// fleet, timed from the shared start.
    async fn one(&self, client: &reqwest::Client) -> CallRecord {
        let call = self.next.fetch_add(1, Ordering::Relaxed);
        let url = format!("{}/{}/status", self.url, call_id(self.replica, call));
        tokio::time::sleep_until(self.start_at).await;
        let began = Instant::now();
        let mut record = CallRecord {
            replica: self.replica,
            call,
            start_us: micros(began.saturating_duration_since(self.start_at)),
            ..CallRecord::default()
        };
        // Direct: one send, whatever the answer (what happens without the limiter).
        let attempts = if self.limiter.is_some() {
            MAX_ATTEMPTS
        } else {
            1
        };
        for _ in 0..attempts {
            let asked = Instant::now();
            // The grant lives until the answer is read: with a cap on calls in flight it holds
            // the call's slot, and the next call may have it only once this one is done.
            let mut grant = None;
            if let Some(limiter) = &self.limiter {
                // The limiter's own deadline refuses a longer wait without taking a token; the
                // outer timeout also bounds the round trips.
                let left = self.max_wait.saturating_sub(began.elapsed());
                let demand = Demand::call().within(left);
                let got = timeout(left + REDIS_TIMEOUT, limiter.acquire_with(demand)).await;
                record.wait_us += micros(asked.elapsed());
                match got {
                    Ok(Ok(granted)) => {
                        record.round_trips += granted.round_trips;
                        record.slept_us += micros(granted.slept);
                        grant = Some(granted);
                    }
                    Ok(Err(err)) => record.error = Some(format!("no token: {err}")),
                    Err(_) => {
                        record.error = Some(format!("no token within {:?}", left + REDIS_TIMEOUT))
                    }
                }
                if record.error.is_some() {
                    return record;
                }
            }
            record.sent_us = micros(self.start_at.elapsed());
            record.sends += 1;
            let response = client
                .get(&url)
                .header(INTEGRATOR_HEADER, &self.integrator)
                .send()
                .await;
            let mut count = redis_throttle::SupplierCount::default();
            let mut retry_after = None;
            match response {
                Ok(response) => {
                    record.status = response.status().as_u16();
                    let now = SystemTime::now();
                    retry_after = (response.headers().get(reqwest::header::RETRY_AFTER))
                        .and_then(|v| parse_retry_after(v.as_bytes(), now));
                    if self.policy.syncs_with_supplier() {
                        count = read_supplier_count(response.headers(), now);
                    }
                    let _ = response.bytes().await;
                }
                Err(err) => record.error = Some(format!("HTTP: {err}")),
            }
            // The call is over: its slot, if it holds one, goes back.
            let left_after_take = grant.take().map_or(u64::MAX, |g| g.remaining);
            let refused = record.status == 429;
            record.refused += u32::from(refused);
            let Some(limiter) = &self.limiter else {
                break;
            };
            if refused {
                // The supplier's word stops (and slows) the whole fleet, also on the last
                // attempt.
                let pause = retry_after.or(count.retry_after).unwrap_or(DEFAULT_PAUSE);
                let at_us = micros(self.start_at.elapsed());
                record
                    .pauses
                    .push((at_us, u64::try_from(pause.as_millis()).unwrap_or(u64::MAX)));
                // One that fails leaves the bucket as it was: the next 429 asks again.
                let _ = match self.policy.cut_for(pause) {
                    Some(cut) => timeout(REDIS_TIMEOUT, limiter.cut(cut))
                        .await
                        .map(|r| r.is_ok()),
                    None => timeout(REDIS_TIMEOUT, limiter.pause(pause))
                        .await
                        .map(|r| r.is_ok()),
                };
            }
            // The supplier's count, when it says less is left than the take left in the
            // bucket, or nothing with a reset: the bucket comes down to it. After the cut, as
            // the HTTP layers do: a count of 0 first would pause the episode and the cut not
            // cut.
            let says_less = count
                .requests
                .is_some_and(|r| r.left < left_after_take || (r.left == 0 && !r.reset.is_zero()));
            if says_less {
                let _ = timeout(REDIS_TIMEOUT, limiter.sync(count)).await;
            }
            if !refused || record.error.is_some() {
                break;
            }
        }
        record
    }
}

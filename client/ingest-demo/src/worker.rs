//! The worker processes (hidden subcommands): each opens its connections, says `ready`,
//! waits for the shared start, works, and reports one JSON line. Phase 1's sends its records
//! at once and retries each refused one after `Retry-After`; the backlog's runs a backlog
//! [`Worker`] loop per stream on the shared bucket until the demo says stop.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use demo_support::child::{self, say, ChildArgs, FromDemo};
use demo_support::http::warm_client;
use demo_support::limiter::checked_limiter;
use demo_support::redis_server::connect_async;
use demo_support::shared_start::micros;
use redis_throttle::backlog::{Backlog, Outcome, Record, Worker, WorkerOptions};
use redis_throttle::{Limiter, Priority, Quota, Throttle};
use tokio::sync::Semaphore;
use tokio::time::{timeout, Instant};

use crate::db::{ATTEMPT_HEADER, RETRY_AFTER_MS_HEADER};
use crate::wire::{BacklogPlan, RetryPlan, WorkerMessage, WorkerReport};

/// Phase 1: a worker's HTTP connections (its writes go out on them as fast as they can).
const CONNECTIONS: usize = 64;
/// Phase 1: tries of one record before it is given up (the bucket serves every record long
/// before), and the whole run's bound.
const MAX_TRIES: u32 = 60;
const RETRY_RUN_LIMIT: Duration = Duration::from_secs(120);
/// Phases 2 and 3: the longest a worker runs without being told to stop.
const BACKLOG_RUN_LIMIT: Duration = Duration::from_secs(300);

pub fn retry_main(args: ChildArgs) -> ExitCode {
    child::run(&who(args.index), async {
        retry_run(args.index, args.plan()?).await
    })
}

pub fn backlog_main(args: ChildArgs) -> ExitCode {
    child::run(&who(args.index), async {
        backlog_run(args.index, args.plan()?).await
    })
}

/// How a worker names itself on stderr.
fn who(index: u32) -> String {
    format!("ingest-demo worker {index}")
}

/// A worker's own count, shared by its writes (none holds it across an await).
type Counts = std::sync::Mutex<WorkerReport>;

fn count(counts: &Counts, f: impl FnOnce(&mut WorkerReport)) {
    f(&mut counts
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner()));
}

/// What a write came to.
enum Answer {
    Written,
    /// Refused, with the exact retry-after (ms header) and HTTP's whole seconds.
    Refused {
        exact: Duration,
        seconds: Duration,
    },
    Error(String),
}

/// One `PUT /docs/{id}`, counted.
async fn put(
    client: &reqwest::Client,
    db: &str,
    id: &str,
    attempt: u64,
    counts: &Counts,
) -> Answer {
    count(counts, |c| c.sent += 1);
    let response = client
        .put(format!("{db}/docs/{id}"))
        .header(ATTEMPT_HEADER, attempt.to_string())
        .body(format!("{{\"id\":\"{id}\",\"ru\":10}}"))
        .send()
        .await;
    let response = match response {
        Ok(response) => response,
        Err(err) => {
            count(counts, |c| c.errors += 1);
            return Answer::Error(format!("HTTP: {err}"));
        }
    };
    let status = response.status().as_u16();
    let header = |name: &str| -> Option<u64> {
        response
            .headers()
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    // The ms header when there is one; else Retry-After's whole seconds.
    let retry_after = header(RETRY_AFTER_MS_HEADER)
        .map(Duration::from_millis)
        .or_else(|| header("retry-after").map(Duration::from_secs))
        .unwrap_or(Duration::from_secs(1));
    let seconds = header("retry-after").map(Duration::from_secs);
    let _ = response.bytes().await;
    match status {
        201 => {
            count(counts, |c| c.stored += 1);
            Answer::Written
        }
        200 => {
            count(counts, |c| c.duplicates += 1);
            Answer::Written
        }
        429 => {
            count(counts, |c| c.refused += 1);
            Answer::Refused {
                exact: retry_after,
                seconds: seconds.unwrap_or(retry_after).max(retry_after),
            }
        }
        other => {
            count(counts, |c| c.errors += 1);
            Answer::Error(format!("HTTP {other}"))
        }
    }
}

/// Opens `connections` HTTP connections to the database `db`, says ready, and sleeps until
/// the shared start: the client, the start, and the demo's line (on which it says stop).
async fn ready(
    db: &str,
    connections: usize,
) -> Result<(reqwest::Client, Instant, FromDemo), String> {
    let client = warm_client(db, "the database", connections).await?;
    let mut from_demo = FromDemo::listen("ingest-demo worker");
    child::say_ready()?;
    let start = from_demo.start().await?;
    tokio::time::sleep_until(start).await;
    Ok((client, start, from_demo))
}

/// The worker's own count, as its report.
fn report(counts: &Counts, index: u32) -> Result<WorkerReport, String> {
    let mut report = counts
        .lock()
        .map_err(|_| "a write panicked".to_owned())?
        .clone();
    report.index = index;
    Ok(report)
}

async fn retry_run(index: u32, args: RetryPlan) -> Result<(), String> {
    let db = args.db.trim_end_matches('/').to_owned();
    let (client, start, _) = ready(&db, CONNECTIONS).await?;

    let counts = Arc::new(Counts::new(WorkerReport::default()));
    let permits = Arc::new(Semaphore::new(CONNECTIONS));
    let deadline = start + RETRY_RUN_LIMIT;
    let mut tasks = Vec::with_capacity(args.count as usize);
    // Every record at once: a task each, as many on the wire as there are connections.
    for n in args.first..args.first.saturating_add(args.count) {
        let (client, db, counts, permits) = (
            client.clone(),
            db.clone(),
            Arc::clone(&counts),
            Arc::clone(&permits),
        );
        tasks.push(tokio::spawn(async move {
            let id = format!("r{n:06}");
            for attempt in 1..=MAX_TRIES {
                let answer = {
                    let Ok(_permit) = permits.acquire().await else {
                        return false;
                    };
                    put(&client, &db, &id, u64::from(attempt), &counts).await
                };
                let pause = match answer {
                    Answer::Written => return true,
                    // Plain HTTP `Retry-After` (whole seconds), as a generic client obeys it.
                    Answer::Refused { seconds, .. } => seconds,
                    Answer::Error(_) => Duration::from_secs(1),
                };
                if Instant::now() + pause > deadline {
                    return false;
                }
                tokio::time::sleep(pause).await;
            }
            false
        }));
    }
    let mut given_up = 0;
    for task in tasks {
        if !task
            .await
            .map_err(|e| format!("a write task failed: {e}"))?
        {
            given_up += 1;
        }
    }
    if given_up > 0 {
        return Err(format!("{given_up} records never got through"));
    }
    say(&WorkerMessage::Report(report(&counts, index)?))
}

/// The document id of a record: the queue's letter and the record's id, so the two queues'
/// stream ids cannot collide in the database.
pub fn doc_id(stream: &str, record_id: &str) -> String {
    let kind = stream.rsplit(':').next().unwrap_or(stream);
    format!("{kind}-{record_id}")
}

async fn backlog_run(index: u32, args: BacklogPlan) -> Result<(), String> {
    let db = args.db.trim_end_matches('/').to_owned();
    let quota = Quota::new(args.capacity, args.rate).map_err(|e| e.to_string())?;
    // Listening, a record whose tokens are reserved sleeps without looking at the bucket
    // after (one round trip a record).
    let builder = Limiter::builder(args.key.as_str(), quota).name("ingest");
    let limiter = checked_limiter(&args.redis_url, builder, Some("")).await?;
    let priority = args
        .floor
        .map_or(Priority::Interactive, |floor| Priority::Bulk { floor });
    let options = WorkerOptions::default()
        .batch(args.batch)
        .block(Duration::from_millis(100))
        .claim_idle(Duration::from_millis(args.claim_idle_ms));
    let mut workers = Vec::with_capacity(args.streams.len());
    for stream in &args.streams {
        // A connection per loop: a blocking read holds its connection.
        let backlog = Backlog::new(
            connect_async(&args.redis_url).await?,
            stream.as_str(),
            &args.group,
        );
        backlog.ensure_group().await.map_err(|e| e.to_string())?;
        let worker = Worker::new(
            backlog,
            format!("worker-{}", index),
            limiter.clone().at_priority(priority),
        )
        .options(options);
        workers.push((stream.clone(), worker));
    }
    let (client, start, mut from_demo) = ready(&db, workers.len()).await?;
    let round_trips_before = limiter.metrics().round_trips;

    let counts = Arc::new(Counts::new(WorkerReport::default()));
    let stops: Vec<_> = workers.iter().map(|(_, w)| w.stop_handle()).collect();
    // A task per stream's loop, on this one thread.
    let loops: Vec<_> = workers
        .into_iter()
        .map(|(stream, worker)| {
            let (client, db, counts) = (client.clone(), db.clone(), Arc::clone(&counts));
            tokio::spawn(async move {
                worker
                    .run(move |record: Record| {
                        let (client, db, counts) =
                            (client.clone(), db.clone(), Arc::clone(&counts));
                        let id = doc_id(&stream, &record.id);
                        async move {
                            // Called right after the record's tokens were granted.
                            let began = Instant::now();
                            let granted_us = micros(began.saturating_duration_since(start));
                            count(&counts, |c| {
                                c.last_grant_us = c.last_grant_us.max(granted_us)
                            });
                            let answer = put(&client, &db, &id, record.deliveries, &counts).await;
                            let trip_us = micros(began.elapsed());
                            count(&counts, |c| c.max_trip_us = c.max_trip_us.max(trip_us));
                            match answer {
                                Answer::Written => Outcome::Done,
                                // The fleet pauses for exactly as long as the database asked.
                                Answer::Refused { exact, .. } => {
                                    Outcome::Throttled { retry_after: exact }
                                }
                                Answer::Error(error) => Outcome::Failed { error },
                            }
                        }
                    })
                    .await
            })
        })
        .collect();
    let all = async {
        let mut metrics = Vec::new();
        for task in loops {
            metrics.push(
                task.await
                    .map_err(|e| format!("a worker loop failed: {e}"))?,
            );
        }
        Ok::<_, String>(metrics)
    };
    tokio::pin!(all);
    // Until the demo says stop (or goes away, or the bound passes); then each loop finishes
    // the record it is on and hands back the rest.
    let metrics = tokio::select! {
        metrics = &mut all => metrics?,
        _ = async {
            let _ = timeout(BACKLOG_RUN_LIMIT, from_demo.next_line()).await;
        } => {
            stops.iter().for_each(|s| s.stop());
            timeout(Duration::from_secs(30), &mut all)
                .await
                .map_err(|_| "the worker loops did not stop within 30 s".to_owned())??
        }
    };
    let mut report = report(&counts, index)?;
    report.round_trips = limiter.metrics().round_trips - round_trips_before;
    for m in metrics {
        report.done += m.done;
        report.claimed += m.claimed;
        report.handed_back += m.handed_back;
        report.dead_lettered += m.dead_lettered;
        report.throttled += m.throttled;
        report.max_wait_us = report.max_wait_us.max(micros(m.max_wait));
    }
    say(&WorkerMessage::Report(report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_are_named_by_queue_and_record() {
        assert_eq!(doc_id("ingest-demo:7:p2:A", "1-0"), "A-1-0");
        assert_eq!(doc_id("B", "x"), "B-x");
    }
}

//! A backlog worker: read, acquire each record's cost, handle, acknowledge.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::streams::{StreamAutoClaimReply, StreamId, StreamPendingCountReply, StreamReadReply};
use tokio::sync::watch;

use super::record::{self, Outcome, Record};
use super::Backlog;
use crate::{Demand, Error, Throttle};

/// How a [`Worker`] reads and retries: set through its methods, each of which says its default.
///
/// The records' priority is the limiter's: give the worker `limiter.at_priority(..)` (a
/// [`Prioritized`](crate::Prioritized)) for a bulk load beside interactive calls on one quota.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerOptions {
    batch: usize,
    block: Duration,
    claim_idle: Duration,
    max_attempts: u32,
    backoff: Duration,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            batch: 16,
            block: Duration::from_millis(200),
            claim_idle: Duration::from_secs(30),
            max_attempts: 3,
            backoff: Duration::from_millis(100),
        }
    }
}

impl WorkerOptions {
    /// Records read at a time (default 16; at least 1). A worker holds them until it has
    /// handled them, so keep it small next to the rate.
    pub fn batch(mut self, batch: usize) -> Self {
        self.batch = batch.max(1);
        self
    }

    /// How long a read waits for new records before the worker looks for stranded ones and
    /// checks whether it is stopped (default 200 ms).
    pub fn block(mut self, block: Duration) -> Self {
        self.block = block;
        self
    }

    /// A record read by a worker and not acknowledged for this long is taken over by another
    /// (its worker is presumed dead; default 30 s). Longer than the longest handler call.
    pub fn claim_idle(mut self, idle: Duration) -> Self {
        self.claim_idle = idle;
        self
    }

    /// Attempts of a record that fails before it goes to the dead letters (default 3; at
    /// least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// First backoff after a failure, doubled each time, with jitter (default 100 ms).
    pub fn backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }
}

/// A worker's counters since it started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerMetrics {
    /// Records the handler finished (acknowledged).
    pub done: u64,
    /// Times the supplier said 429 and the fleet paused.
    pub throttled: u64,
    /// Failed attempts that were retried.
    pub retried: u64,
    /// Records moved to the dead letters.
    pub dead_lettered: u64,
    /// Records taken over from a worker that stopped answering.
    pub claimed: u64,
    /// Records handed back unhandled when the worker stopped.
    pub handed_back: u64,
    /// Records being handled now (0 or 1).
    pub in_flight: u64,
    /// Time spent waiting for tokens, all records together.
    pub total_wait: Duration,
    /// The longest wait for tokens of one record.
    pub max_wait: Duration,
}

#[derive(Debug, Default)]
struct Counters {
    done: AtomicU64,
    throttled: AtomicU64,
    retried: AtomicU64,
    dead_lettered: AtomicU64,
    claimed: AtomicU64,
    handed_back: AtomicU64,
    in_flight: AtomicU64,
    total_wait_us: AtomicU64,
    max_wait_us: AtomicU64,
}

/// Stops a running [`Worker`]: it finishes the record its handler is on, hands back the
/// records it read and has not started, and returns. Cheap to clone.
#[derive(Clone, Debug)]
pub struct StopHandle(Arc<watch::Sender<bool>>);

impl StopHandle {
    /// Asks the worker to stop.
    pub fn stop(&self) {
        self.0.send_replace(true);
    }
}

/// Takes records off a [`Backlog`] (over a connection `C`) at the rate a limiter `A` allows:
/// any [`Throttle`], such as a [`Limiter`](crate::Limiter), a
/// [`MultiLimiter`](crate::MultiLimiter) or a
/// [`PartitionedLimiter`](crate::partitioned::PartitionedLimiter). See the
/// [module](crate::backlog) for the guarantees.
///
/// Give the worker's backlog a connection of its own: a read blocks its connection for up to
/// [`WorkerOptions::block`], and a multiplexed connection shared with the limiter would hold
/// the limiter's calls that long.
pub struct Worker<C, A> {
    backlog: Backlog<C>,
    consumer: String,
    limiter: A,
    options: WorkerOptions,
    counters: Arc<Counters>,
    stop: Arc<watch::Sender<bool>>,
}

impl<C, A: fmt::Debug> fmt::Debug for Worker<C, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("stream", &self.backlog.stream())
            .field("consumer", &self.consumer)
            .field("limiter", &self.limiter)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Where a record ended.
enum Settled {
    Finished,
    /// Stopped while waiting for its tokens: hand it back.
    Stopped,
}

impl<C, A> Worker<C, A>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
    A: Throttle,
{
    /// A worker named `consumer` (unique in the group: a host and process id, say) on
    /// `backlog`, taking each record's cost from `limiter`: any [`Throttle`].
    pub fn new(backlog: Backlog<C>, consumer: impl Into<String>, limiter: A) -> Self {
        Worker {
            backlog,
            consumer: consumer.into(),
            limiter,
            options: WorkerOptions::default(),
            counters: Arc::default(),
            stop: Arc::new(watch::channel(false).0),
        }
    }

    /// Sets how the worker reads and retries.
    pub fn options(mut self, options: WorkerOptions) -> Self {
        self.options = options;
        self
    }

    /// A handle that stops [`Worker::run`].
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle(Arc::clone(&self.stop))
    }

    /// The worker's counters.
    pub fn metrics(&self) -> WorkerMetrics {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Relaxed);
        WorkerMetrics {
            done: load(&c.done),
            throttled: load(&c.throttled),
            retried: load(&c.retried),
            dead_lettered: load(&c.dead_lettered),
            claimed: load(&c.claimed),
            handed_back: load(&c.handed_back),
            in_flight: load(&c.in_flight),
            total_wait: Duration::from_micros(load(&c.total_wait_us)),
            max_wait: Duration::from_micros(load(&c.max_wait_us)),
        }
    }

    /// Runs until stopped ([`Worker::stop_handle`]): takes over stranded records, reads new
    /// ones, and hands each to `handler` once its cost is acquired. Connection trouble is
    /// retried (a record not acknowledged is delivered again); only a stop ends the loop.
    ///
    /// Records are handled one at a time, in the order read; for more at once, run more
    /// workers (each with its own consumer name), in one process or several.
    ///
    /// To end a worker, stop it: it finishes the record its handler is on, hands back what it
    /// read and did not start (claimable by the next worker at once), and returns. Dropping
    /// this future instead (a task aborted, a `select!` that lost) loses nothing either, but
    /// what it had read stays with it until another worker's claim finds it idle for
    /// [`claim_idle`](WorkerOptions::claim_idle) (30 s by default): stop for a planned end,
    /// and leave drops to crashes.
    pub async fn run<H, F>(&self, handler: H) -> WorkerMetrics
    where
        H: Fn(Record) -> F,
        F: Future<Output = Outcome>,
    {
        let mut stopped = self.stop.subscribe();
        let mut trouble = 0u32;
        while !*stopped.borrow() {
            match self.round(&handler, &mut stopped).await {
                Ok(()) => trouble = 0,
                Err(err) => {
                    trouble = trouble.saturating_add(1);
                    let pause = backoff(self.options.backoff, trouble, fastrand::f64());
                    tracing::warn!(error = %err, ?pause, "backlog worker: retrying after an error");
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = stopped.wait_for(|s| *s) => {}
                    }
                }
            }
        }
        self.metrics()
    }

    /// One round: stranded records first, else a read; then each record in turn.
    async fn round<H, F>(
        &self,
        handler: &H,
        stopped: &mut watch::Receiver<bool>,
    ) -> Result<(), Error>
    where
        H: Fn(Record) -> F,
        F: Future<Output = Outcome>,
    {
        self.backlog.ensure_group().await?;
        let mut entries = self.claim().await?;
        if entries.is_empty() {
            entries = self.read().await?;
        }
        for (i, (entry, deliveries)) in entries.iter().enumerate() {
            if *stopped.borrow() {
                return self.hand_back(entries.get(i..).unwrap_or(&[])).await;
            }
            let Some(record) = Record::from_entry(entry, *deliveries) else {
                self.dead_letter_raw(entry).await?;
                continue;
            };
            match self.handle(record, handler, stopped).await? {
                Settled::Finished => {}
                Settled::Stopped => return self.hand_back(entries.get(i..).unwrap_or(&[])).await,
            }
        }
        Ok(())
    }

    /// Acquire, call, settle; again after a 429 or a failure, as the outcome says.
    async fn handle<H, F>(
        &self,
        record: Record,
        handler: &H,
        stopped: &mut watch::Receiver<bool>,
    ) -> Result<Settled, Error>
    where
        H: Fn(Record) -> F,
        F: Future<Output = Outcome>,
    {
        let max_attempts = u64::from(self.options.max_attempts);
        // A record delivered before has failed (or was held by a worker that died) that many
        // times already: count those against its attempts, so a record that kills workers
        // ends in the dead letters too.
        let mut failures = record.deliveries.saturating_sub(1);
        if failures >= max_attempts {
            let error = format!(
                "delivered {} times without being acknowledged",
                record.deliveries
            );
            self.dead_letter(&record, &error, failures).await?;
            return Ok(Settled::Finished);
        }
        loop {
            // Waiting for tokens is the one wait a stop cuts short: the tokens go back to
            // the bucket (the acquire is dropped) and the record goes back to the queue.
            let grant = tokio::select! {
                biased;
                _ = stopped.wait_for(|s| *s) => return Ok(Settled::Stopped),
                grant = self.limiter.acquire_with(
                    Demand::tokens(record.cost)
                ) => grant,
            };
            let grant = match grant {
                Ok(grant) => grant,
                Err(Error::InvalidQuota(err)) => {
                    self.dead_letter(&record, &err.to_string(), failures)
                        .await?;
                    return Ok(Settled::Finished);
                }
                Err(other) => return Err(other),
            };
            self.waited(grant.waited);
            self.counters.in_flight.store(1, Relaxed);
            let outcome = handler(record.clone()).await;
            self.counters.in_flight.store(0, Relaxed);
            match outcome {
                Outcome::Done => {
                    self.ack(&record).await?;
                    self.counters.done.fetch_add(1, Relaxed);
                    return Ok(Settled::Finished);
                }
                Outcome::Throttled { retry_after } => {
                    // The supplier's word holds for the whole fleet: pause the bucket, then
                    // this record is the first to go again (acquire waits out the pause).
                    self.counters.throttled.fetch_add(1, Relaxed);
                    self.limiter.pause(retry_after).await?;
                }
                Outcome::Failed { error } => {
                    failures += 1;
                    if failures >= max_attempts {
                        self.dead_letter(&record, &error, failures).await?;
                        return Ok(Settled::Finished);
                    }
                    self.counters.retried.fetch_add(1, Relaxed);
                    let pause = backoff(
                        self.options.backoff,
                        u32::try_from(failures).unwrap_or(u32::MAX),
                        fastrand::f64(),
                    );
                    tracing::debug!(id = %record.id, %error, ?pause, "record failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = stopped.wait_for(|s| *s) => return Ok(Settled::Stopped),
                    }
                }
            }
        }
    }

    fn waited(&self, wait: Duration) {
        let us = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
        self.counters.total_wait_us.fetch_add(us, Relaxed);
        self.counters.max_wait_us.fetch_max(us, Relaxed);
    }

    /// Records of other consumers idle for `claim_idle`, taken over, with their delivery
    /// counts.
    async fn claim(&self) -> Result<Vec<(StreamId, u64)>, Error> {
        let b = &self.backlog;
        let mut conn = b.conn.clone();
        let reply: StreamAutoClaimReply = redis::cmd("XAUTOCLAIM")
            .arg(&b.stream)
            .arg(&b.group)
            .arg(&self.consumer)
            .arg(millis(self.options.claim_idle))
            .arg("0-0")
            .arg("COUNT")
            .arg(self.options.batch)
            .query_async(&mut conn)
            .await
            .map_err(Error::from_redis)?;
        if reply.claimed.is_empty() {
            return Ok(Vec::new());
        }
        self.counters
            .claimed
            .fetch_add(reply.claimed.len() as u64, Relaxed);
        tracing::info!(
            records = reply.claimed.len(),
            consumer = %self.consumer,
            "claimed records a stopped worker held"
        );
        let deliveries = self.deliveries(&reply.claimed).await?;
        Ok(reply
            .claimed
            .into_iter()
            .map(|entry| {
                let count = deliveries.get(&entry.id).copied().unwrap_or(1);
                (entry, count)
            })
            .collect())
    }

    /// How many times each of our pending `entries` has been delivered.
    async fn deliveries(&self, entries: &[StreamId]) -> Result<HashMap<String, u64>, Error> {
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            return Ok(HashMap::new());
        };
        let b = &self.backlog;
        let mut conn = b.conn.clone();
        let pending: StreamPendingCountReply = redis::cmd("XPENDING")
            .arg(&b.stream)
            .arg(&b.group)
            .arg(&first.id)
            .arg(&last.id)
            .arg(entries.len())
            .arg(&self.consumer)
            .query_async(&mut conn)
            .await
            .map_err(Error::from_redis)?;
        Ok(pending
            .ids
            .into_iter()
            .map(|p| (p.id, p.times_delivered as u64))
            .collect())
    }

    /// New records, waiting up to `block` for some.
    async fn read(&self) -> Result<Vec<(StreamId, u64)>, Error> {
        let b = &self.backlog;
        let mut conn = b.conn.clone();
        let reply: Option<StreamReadReply> = redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg(&b.group)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(self.options.batch)
            .arg("BLOCK")
            .arg(millis(self.options.block))
            .arg("STREAMS")
            .arg(&b.stream)
            .arg(">")
            .query_async(&mut conn)
            .await
            .map_err(Error::from_redis)?;
        Ok(reply
            .into_iter()
            .flat_map(|r| r.keys)
            .flat_map(|k| k.ids)
            .map(|entry| (entry, 1))
            .collect())
    }

    /// Acknowledges and deletes a finished record, and takes its cost off the queue's.
    async fn ack(&self, record: &Record) -> Result<(), Error> {
        self.settle(&record.entry, record.cost, &[]).await
    }

    /// Moves a record to the dead letters with its error, with its acknowledgement.
    async fn dead_letter(&self, record: &Record, error: &str, attempts: u64) -> Result<(), Error> {
        let cost = record.cost.to_string();
        let attempts = attempts.to_string();
        let fields: [(&str, &[u8]); 6] = [
            (record::ID, record.id.as_bytes()),
            ("entry", record.entry.as_bytes()),
            (record::COST, cost.as_bytes()),
            (record::PAYLOAD, &record.payload),
            ("error", error.as_bytes()),
            ("attempts", attempts.as_bytes()),
        ];
        self.settle(&record.entry, record.cost, &fields).await?;
        self.counters.dead_lettered.fetch_add(1, Relaxed);
        tracing::warn!(id = %record.id, %error, attempts, "record moved to the dead letters");
        Ok(())
    }

    /// An entry that is not a record (pushed by something else): kept whole in the dead
    /// letters, so nothing is lost, and out of the way.
    async fn dead_letter_raw(&self, entry: &StreamId) -> Result<(), Error> {
        let raw = record::raw_fields(entry);
        let names: Vec<String> = raw.keys().map(|field| format!("field:{field}")).collect();
        let mut fields: Vec<(&str, &[u8])> = vec![
            ("entry", entry.id.as_bytes()),
            (
                "error",
                b"not a backlog record: it needs the fields cost (a whole number) and payload",
            ),
        ];
        fields.extend(
            names
                .iter()
                .map(String::as_str)
                .zip(raw.values().map(Vec::as_slice)),
        );
        self.settle(&entry.id, 0, &fields).await?;
        self.counters.dead_lettered.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Acknowledges `entry`, and only if this acknowledgement is the one that counts (a
    /// record taken over from a slow worker may be finished by both), deletes it, takes its
    /// cost off the queue's and writes its dead letter (`dead_letter`: the fields, or none).
    /// One script, so all of it happens or none.
    async fn settle(
        &self,
        entry: &str,
        cost: u64,
        dead_letter: &[(&str, &[u8])],
    ) -> Result<(), Error> {
        let b = &self.backlog;
        let mut invocation = SETTLE.prepare_invoke();
        invocation
            .key(&b.stream)
            .key(&b.cost)
            .key(&b.dead)
            .arg(&b.group)
            .arg(entry)
            .arg(cost);
        for (field, value) in dead_letter {
            invocation.arg(*field).arg(*value);
        }
        let mut conn = b.conn.clone();
        invocation
            .invoke_async::<i64>(&mut conn)
            .await
            .map(drop)
            .map_err(Error::from_redis)
    }

    /// Gives records back unhandled: they stay pending but look idle long enough for the
    /// next worker's claim to take them at once.
    async fn hand_back(&self, entries: &[(StreamId, u64)]) -> Result<(), Error> {
        if entries.is_empty() {
            return Ok(());
        }
        let b = &self.backlog;
        // Idle as of long ago. The next worker's claim counts a delivery, so the count goes
        // one back first: a record handed back is not a record that failed.
        let idle = millis(self.options.claim_idle).saturating_add(86_400_000);
        let mut pipe = redis::pipe();
        for (entry, deliveries) in entries {
            pipe.cmd("XCLAIM")
                .arg(&b.stream)
                .arg(&b.group)
                .arg(&self.consumer)
                .arg(0)
                .arg(&entry.id)
                .arg("IDLE")
                .arg(idle)
                .arg("RETRYCOUNT")
                .arg(deliveries.saturating_sub(1))
                .arg("JUSTID")
                .ignore();
        }
        let mut conn = b.conn.clone();
        pipe.query_async::<()>(&mut conn)
            .await
            .map_err(Error::from_redis)?;
        self.counters
            .handed_back
            .fetch_add(entries.len() as u64, Relaxed);
        Ok(())
    }
}

/// Acknowledges an entry; only when that acknowledgement counted (XACK returns 1) deletes it,
/// takes its cost off the queue's and, given fields, adds its dead letter.
/// KEYS: stream, cost, dead letters. ARGV: group, entry, cost, dead-letter fields and values.
static SETTLE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  return 0
end
redis.call('XDEL', KEYS[1], ARGV[2])
if ARGV[3] ~= '0' then
  redis.call('DECRBY', KEYS[2], ARGV[3])
end
if #ARGV > 3 then
  redis.call('XADD', KEYS[3], '*', unpack(ARGV, 4))
end
return 1
",
    )
});

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `base * 2^(attempt - 1)`, capped at 30 s, times a jitter factor in [0.5, 1.5).
fn backoff(base: Duration, attempt: u32, jitter: f64) -> Duration {
    let doubled = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    doubled
        .min(Duration::from_secs(30))
        .mul_f64(0.5 + jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let ms = Duration::from_millis;
        assert_eq!(backoff(ms(100), 1, 0.5), ms(100));
        assert_eq!(backoff(ms(100), 2, 0.5), ms(200));
        assert_eq!(backoff(ms(100), 3, 0.0), ms(200));
        assert_eq!(backoff(ms(100), 3, 1.0), ms(600));
        assert_eq!(backoff(ms(100), 40, 0.5), Duration::from_secs(30));
    }
}

//! The backlog: work that must not be lost, taken off a durable queue at the rate the
//! supplier allows (the cloud Rate Limiting pattern).
//!
//! Producers [`push`](Backlog::push) records (each with its cost in the bucket's tokens) onto
//! a Redis Stream; [`Worker`]s, any number, on any machines, read them through one consumer
//! group, acquire each record's cost from a shared limiter (any [`Throttle`]:
//! a [`Limiter`](crate::Limiter), a [`MultiLimiter`](crate::MultiLimiter), or a
//! [`PartitionedLimiter`](crate::partitioned::PartitionedLimiter)), call
//! the handler, and acknowledge only what the handler finished. A worker that dies loses
//! nothing: its records stay pending, and the others claim them once they have been idle for
//! [`WorkerOptions::claim_idle`] (`XAUTOCLAIM`). Delivery is at least once, so the handler is
//! idempotent by [`Record::id`].
//!
//! Keys, for a stream `S` (all in `S`'s cluster slot): `S` itself, the dead letters
//! `{S}:dead` and the queued cost `{S}:cost` (`S:dead` and `S:cost` when `S` has braces: give
//! it a hash tag then, like `{orders}:ingest`). A record acknowledged is deleted from the stream, so `XLEN S` is the work
//! left.

mod record;
mod worker;

use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::streams::StreamRangeReply;
use redis::Value;

pub use record::{Outcome, Record};
pub use worker::{StopHandle, Worker, WorkerMetrics, WorkerOptions};

use crate::{Error, Throttle};

/// A durable queue of records on a Redis Stream, read by one consumer group.
///
/// ```no_run
/// use std::time::Duration;
/// use redis_throttle::backlog::{Backlog, Outcome, Worker};
/// use redis_throttle::{Limiter, Quota};
///
/// # async fn run(conn: redis::aio::ConnectionManager, limiter_conn: redis::aio::ConnectionManager) -> Result<(), redis_throttle::Error> {
/// let backlog = Backlog::new(conn.clone(), "ingest:orders", "writers");
/// backlog.push(b"{\"order\": 1}".to_vec(), 10).await?; // 10 request units
///
/// // 20 000 RU per second, shared by every worker of the fleet.
/// let limiter = Limiter::builder("quota:db", Quota::new(20_000, 20_000)?).build(limiter_conn)?;
/// let worker = Worker::new(backlog, "worker-1", limiter);
/// let stop = worker.stop_handle();
/// # stop.stop();
/// worker
///     .run(|record| async move {
///         // write record.payload with record.id as the idempotency key...
///         Outcome::Done
///     })
///     .await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Backlog<C> {
    conn: C,
    stream: String,
    group: String,
    dead: String,
    cost: String,
}

/// What a backlog holds, from [`Backlog::stats`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BacklogStats {
    /// Records not finished: waiting to be read, or read and not yet acknowledged.
    pub depth: u64,
    /// Records read by a worker and not yet acknowledged: being handled, held by a worker
    /// that died (until another claims them, once idle for
    /// [`claim_idle`](WorkerOptions::claim_idle)), or handed back by a worker that was stopped
    /// (a stream cannot un-read a record: it stays pending, marked idle long enough that the
    /// next worker to read claims it at once).
    pub in_flight: u64,
    /// Records in the dead-letter stream.
    pub dead_letters: u64,
    /// The sum of the costs of the records not finished.
    pub queued_cost: u64,
    /// How long the oldest unfinished record has been queued (`None`: the queue is empty).
    pub oldest_age: Option<Duration>,
    /// How long the queued cost takes at the bucket's quota, from its state now: the pattern's
    /// promise that a rate-limited backlog's finish time is known in advance.
    pub drain_time: Duration,
}

impl<C> Backlog<C> {
    /// A backlog on the stream `stream`, read by the consumer group `group`. Makes no round
    /// trip; the group is created (reading from the stream's start) when a worker starts.
    pub fn new(conn: C, stream: impl Into<String>, group: impl Into<String>) -> Backlog<C> {
        let stream = stream.into();
        Backlog {
            dead: sibling(&stream, "dead"),
            cost: sibling(&stream, "cost"),
            conn,
            stream,
            group: group.into(),
        }
    }

    /// The stream's key.
    pub fn stream(&self) -> &str {
        &self.stream
    }

    /// The dead-letter stream's key: records that failed `max_attempts` times, each with its
    /// error (fields `id`, `entry`, `cost`, `payload`, `error`, `attempts`).
    pub fn dead_letter_stream(&self) -> &str {
        &self.dead
    }

    /// The consumer group.
    pub fn group(&self) -> &str {
        &self.group
    }
}

impl<C> Backlog<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    /// Appends a record of `cost` tokens; returns its stream entry id, which is also its
    /// [`Record::id`].
    pub async fn push(&self, payload: impl Into<Vec<u8>>, cost: u64) -> Result<String, Error> {
        let ids = self.push_all([(None, payload.into(), cost)]).await?;
        ids.into_iter()
            .next()
            .ok_or_else(|| Error::UnexpectedReply {
                reply: "XADD returned no id".to_owned(),
            })
    }

    /// Appends a record with an id of the caller's (the supplier's idempotency key).
    pub async fn push_with_id(
        &self,
        id: impl Into<String>,
        payload: impl Into<Vec<u8>>,
        cost: u64,
    ) -> Result<String, Error> {
        let ids = self
            .push_all([(Some(id.into()), payload.into(), cost)])
            .await?;
        ids.into_iter()
            .next()
            .ok_or_else(|| Error::UnexpectedReply {
                reply: "XADD returned no id".to_owned(),
            })
    }

    /// Appends records `(payload, cost)` in one transaction; returns their entry ids.
    pub async fn push_batch(
        &self,
        records: impl IntoIterator<Item = (Vec<u8>, u64)>,
    ) -> Result<Vec<String>, Error> {
        self.push_all(records.into_iter().map(|(p, c)| (None, p, c)))
            .await
    }

    async fn push_all(
        &self,
        records: impl IntoIterator<Item = (Option<String>, Vec<u8>, u64)>,
    ) -> Result<Vec<String>, Error> {
        let mut pipe = redis::pipe();
        pipe.atomic();
        let mut total = 0u64;
        let mut count = 0usize;
        for (id, payload, cost) in records {
            let cmd = pipe.cmd("XADD").arg(&self.stream).arg("*");
            if let Some(id) = id {
                cmd.arg(record::ID).arg(id);
            }
            cmd.arg(record::COST)
                .arg(cost)
                .arg(record::PAYLOAD)
                .arg(payload);
            total = total.saturating_add(cost);
            count += 1;
        }
        if count == 0 {
            return Ok(Vec::new());
        }
        pipe.cmd("INCRBY").arg(&self.cost).arg(total).ignore();
        let mut conn = self.conn.clone();
        pipe.query_async(&mut conn).await.map_err(Error::from_redis)
    }

    /// Creates the consumer group if it is not there (reading from the stream's start, so
    /// records pushed before any worker ran are read too).
    pub async fn ensure_group(&self) -> Result<(), Error> {
        let mut conn = self.conn.clone();
        let created: Result<Value, _> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(&self.stream)
            .arg(&self.group)
            .arg("0")
            .arg("MKSTREAM")
            .query_async(&mut conn)
            .await;
        match created {
            Err(err) if err.code() == Some("BUSYGROUP") => Ok(()),
            other => other.map(drop).map_err(Error::from_redis),
        }
    }

    /// What the backlog holds now, and how long its queued cost takes at `limiter`'s quota
    /// (any [`Throttle`]), from its bucket as it stands.
    pub async fn stats(&self, limiter: &impl Throttle) -> Result<BacklogStats, Error> {
        let mut pipe = redis::pipe();
        pipe.cmd("XLEN").arg(&self.stream);
        pipe.cmd("XLEN").arg(&self.dead);
        pipe.cmd("GET").arg(&self.cost);
        pipe.cmd("XRANGE")
            .arg(&self.stream)
            .arg("-")
            .arg("+")
            .arg("COUNT")
            .arg(1);
        pipe.cmd("TIME");
        let mut conn = self.conn.clone();
        let (depth, dead_letters, queued_cost, oldest, (secs, micros)): (
            u64,
            u64,
            Option<u64>,
            StreamRangeReply,
            (u64, u64),
        ) = pipe
            .query_async(&mut conn)
            .await
            .map_err(Error::from_redis)?;
        let in_flight = self.pending_count().await?;
        let now_ms = secs * 1000 + micros / 1000;
        let oldest_age = oldest
            .ids
            .first()
            .and_then(|entry| entry_ms(&entry.id))
            .map(|ms| Duration::from_millis(now_ms.saturating_sub(ms)));
        let queued_cost = queued_cost.unwrap_or(0);
        let drain_time = limiter.time_to_serve(depth, queued_cost).await?;
        Ok(BacklogStats {
            depth,
            in_flight,
            dead_letters,
            queued_cost,
            oldest_age,
            drain_time,
        })
    }

    /// Records delivered and not yet acknowledged (0 before the group exists).
    async fn pending_count(&self) -> Result<u64, Error> {
        let mut conn = self.conn.clone();
        let summary: Result<Value, _> = redis::cmd("XPENDING")
            .arg(&self.stream)
            .arg(&self.group)
            .query_async(&mut conn)
            .await;
        match summary {
            Ok(Value::Array(items)) => match items.first() {
                Some(Value::Int(n)) => Ok(u64::try_from(*n).unwrap_or(0)),
                _ => Ok(0),
            },
            Ok(_) => Ok(0),
            Err(err) if err.code() == Some("NOGROUP") => Ok(0),
            Err(err) => Err(Error::from_redis(err)),
        }
    }
}

/// A key next to `stream`, in its cluster slot: `{stream}:suffix` hashes exactly `stream`.
/// A stream key with braces of its own is expected to carry a hash tag, which `stream:suffix`
/// keeps.
fn sibling(stream: &str, suffix: &str) -> String {
    if stream.contains(['{', '}']) {
        format!("{stream}:{suffix}")
    } else {
        format!("{{{stream}}}:{suffix}")
    }
}

/// The ms timestamp in a stream entry id (`<ms>-<seq>`).
fn entry_ms(id: &str) -> Option<u64> {
    id.split('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_keys_share_the_stream_slot() {
        assert_eq!(sibling("ingest:A", "dead"), "{ingest:A}:dead");
        assert_eq!(sibling("{db}:ingest:A", "cost"), "{db}:ingest:A:cost");
        assert_eq!(entry_ms("1764547200123-7"), Some(1_764_547_200_123));
        assert_eq!(entry_ms("x"), None);
    }
}

//! What travels through a backlog: a record, and what the handler made of it.

use std::collections::HashMap;
use std::time::Duration;

use redis::streams::StreamId;
use redis::Value;

/// One record taken off the queue for the handler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The record's id, the same at every delivery: the one given to
    /// [`Backlog::push_with_id`](crate::backlog::Backlog::push_with_id), or else its stream
    /// entry id. Delivery is at least once, so a handler passes it to the supplier (an
    /// idempotency key) or checks it, and a duplicate does no harm.
    pub id: String,
    /// The stream entry id (`XADD`'s), for acknowledging.
    pub entry: String,
    /// Its cost in the bucket's tokens: records, bytes, request units.
    pub cost: u64,
    /// The payload, as pushed.
    pub payload: Vec<u8>,
    /// How many times the queue has handed this record out, this delivery included (more
    /// than 1: a worker died holding it, or it failed before). A record a stopping worker
    /// handed back unhandled does not count that time.
    pub deliveries: u64,
}

/// What the handler made of a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Finished: the record is acknowledged and leaves the queue.
    Done,
    /// The supplier answered 429 (or 503) with this `Retry-After`: the whole fleet pauses on
    /// the bucket, and the record is delivered again after the pause.
    Throttled {
        /// How long the supplier asked for.
        retry_after: Duration,
    },
    /// It failed: retried with backoff, at most the worker's `max_attempts` times in all,
    /// then moved to the dead-letter stream with this error.
    Failed {
        /// What went wrong, kept with the dead letter.
        error: String,
    },
}

/// The stream fields of a record.
pub(crate) const COST: &str = "cost";
pub(crate) const PAYLOAD: &str = "payload";
pub(crate) const ID: &str = "id";

impl Record {
    /// Reads a stream entry; `None` for an entry that is not a record (not pushed by a
    /// [`Backlog`](crate::backlog::Backlog)), which the worker moves to the dead letters.
    pub(crate) fn from_entry(entry: &StreamId, deliveries: u64) -> Option<Record> {
        let field = |name: &str| bytes(entry.map.get(name)?);
        let cost = String::from_utf8(field(COST)?).ok()?.parse().ok()?;
        let payload = field(PAYLOAD)?;
        let id = match field(ID) {
            Some(id) => String::from_utf8(id).ok()?,
            None => entry.id.clone(),
        };
        Some(Record {
            id,
            entry: entry.id.clone(),
            cost,
            payload,
            deliveries,
        })
    }
}

/// The fields of an entry that is not a record, kept in its dead letter.
pub(crate) fn raw_fields(entry: &StreamId) -> HashMap<String, Vec<u8>> {
    entry
        .map
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), bytes(v)?)))
        .collect()
}

fn bytes(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::BulkString(bytes) => Some(bytes.clone()),
        Value::SimpleString(text) => Some(text.clone().into_bytes()),
        Value::Int(n) => Some(n.to_string().into_bytes()),
        _ => None,
    }
}

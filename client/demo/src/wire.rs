//! What the demo and its replica processes tell each other, one JSON object per line (the
//! harness is `demo_support::fleet` and `demo_support::child`): a replica says `ready` on
//! stdout, the demo answers with the start instant on its stdin, and the replica reports one
//! `call` line per query when they are all done, then one `done` line with its limiter's
//! counters.

use demo_support::fleet::ChildMessage;
use serde::{Deserialize, Serialize};

/// Replica to demo, on the replica's stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ReplicaMessage {
    /// Connections are open; waiting for the start instant.
    Ready,
    Call(CallRecord),
    /// After the last call: the limiter's own counters.
    Done(ReplicaStats),
}

impl ChildMessage for ReplicaMessage {
    fn is_ready(&self) -> bool {
        matches!(self, ReplicaMessage::Ready)
    }
}

/// One replica's limiter, as it reports itself (`Limiter::metrics`) after its calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplicaStats {
    pub replica: u32,
    /// What served the calls: `module` or `script` (`None` when direct: no limiter).
    pub backend: Option<String>,
    pub granted: u64,
    pub pauses: u64,
    pub tokens_given_back: u64,
    pub round_trips: u64,
    /// `MetricsSnapshot::pushback`: cuts that cut the rate, cuts of an episode already cut,
    /// syncs that lowered the bucket and those that changed nothing, reserved calls a pause
    /// held back, pauses that changed nothing.
    #[serde(default)]
    pub cuts: u64,
    #[serde(default)]
    pub cuts_same_episode: u64,
    #[serde(default)]
    pub syncs: u64,
    #[serde(default)]
    pub syncs_unchanged: u64,
    #[serde(default)]
    pub held_by_pause: u64,
    #[serde(default)]
    pub pauses_unchanged: u64,
    /// `MetricsSnapshot::in_flight`, with a cap on calls in flight: calls that found every
    /// slot held and waited for one, and slots whose lease ran out while held.
    #[serde(default)]
    pub slot_waits: u64,
    #[serde(default)]
    pub leases_lost: u64,
}

/// The id a call carries in its URL (`/pix/{id}/status`), so the upstream's log says whose
/// call each arrival was.
pub fn call_id(replica: u32, call: u32) -> String {
    format!("E{replica:02}{call:04}")
}

/// The replica of a [`call_id`], if it is one.
pub fn replica_of(id: &str) -> Option<u32> {
    id.strip_prefix('E')?.get(..2)?.parse().ok()
}

/// One query, timed by the replica. Offsets are from the shared start instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    pub replica: u32,
    pub call: u32,
    /// When the task began, in µs after the start (about 0: all fire together).
    pub start_us: u64,
    /// Time spent getting a token from the shared bucket, in µs, over every attempt (0
    /// when direct).
    pub wait_us: u64,
    /// Of `wait_us`, the sleeps the server asked for (its reservations' waits), in µs: the
    /// rest is the machine's (round trips, a timer's lateness).
    #[serde(default)]
    pub slept_us: u64,
    /// When the last attempt went out, in µs after the start.
    pub sent_us: u64,
    /// The last attempt's HTTP status, or 0 when no answer came.
    pub status: u16,
    /// Round trips to Redis for the tokens, over every attempt.
    pub round_trips: u32,
    /// Why the call failed before an HTTP status, if it did.
    pub error: Option<String>,
    /// Every send, in order: one when direct or when the first was served.
    pub attempts: Vec<Attempt>,
}

/// One send of a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// Time spent getting this attempt's token, in µs.
    pub wait_us: u64,
    /// When the request went out, in µs after the start.
    pub sent_us: u64,
    /// The HTTP status, or 0 when no answer came.
    pub status: u16,
    /// The 429's `Retry-After`, in seconds.
    pub retry_after_s: Option<u64>,
    /// The pause this attempt's 429 set on the shared bucket.
    pub pause: Option<PauseRecord>,
    /// This attempt's 429 cut the bucket's rate (`false`: the same episode, it only paused;
    /// `None`: no cut sent).
    #[serde(default)]
    pub cut: Option<bool>,
    /// The supplier's count was sent to the bucket (`THROTTLE.SYNC`): whether it lowered it.
    #[serde(default)]
    pub synced: Option<bool>,
}

/// A `THROTTLE.PAUSE` a replica sent after a 429.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseRecord {
    /// When it was sent, in µs after the start.
    pub at_us: u64,
    /// How long the pause was asked for (the supplier's Retry-After), in ms.
    pub asked_ms: u64,
    /// The server's reply: ms until the bucket's next token. More than `asked_ms` when the
    /// bucket already owed tokens further out (reservations keep their slots).
    pub next_token_ms: Option<u64>,
    /// Why the pause failed, if it did.
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_tagged_json_object_per_line() {
        assert_eq!(
            serde_json::to_string(&ReplicaMessage::Ready).unwrap(),
            r#"{"type":"ready"}"#
        );
        let call = ReplicaMessage::Call(CallRecord {
            replica: 1,
            call: 7,
            start_us: 12,
            wait_us: 111_000,
            slept_us: 110_500,
            sent_us: 111_020,
            status: 200,
            round_trips: 1,
            error: None,
            attempts: vec![Attempt {
                wait_us: 111_000,
                sent_us: 111_020,
                status: 200,
                retry_after_s: None,
                pause: None,
                cut: None,
                synced: None,
            }],
        });
        let line = serde_json::to_string(&call).unwrap();
        assert!(
            line.starts_with(r#"{"type":"call","replica":1,"call":7,"#),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<ReplicaMessage>(&line).unwrap(), call);
        let done = ReplicaMessage::Done(ReplicaStats {
            replica: 1,
            backend: Some("script".to_owned()),
            ..ReplicaStats::default()
        });
        let line = serde_json::to_string(&done).unwrap();
        assert!(line.starts_with(r#"{"type":"done","replica":1,"#), "{line}");
        assert_eq!(serde_json::from_str::<ReplicaMessage>(&line).unwrap(), done);
    }

    #[test]
    fn call_ids_name_their_replica() {
        assert_eq!(call_id(1, 7), "E010007");
        assert_eq!(replica_of(&call_id(7, 399)), Some(7));
        assert_eq!(replica_of("X01"), None);
        assert_eq!(replica_of("E"), None);
    }
}

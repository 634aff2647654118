//! What the demo and its replica processes tell each other, one JSON object per line (the
//! harness is `demo_support::fleet` and `demo_support::child`): a replica says `ready` on
//! stdout, the demo answers with the start instant on its stdin, and the replica reports one
//! `call` line per query when they are all done, then one `done` line with its limiter's
//! counters.

use serde::{Deserialize, Serialize};

/// Replica to demo, on the replica's stdout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ReplicaMessage {
    Call(CallRecord),
    /// After the last call: the limiter's own counters.
    Done(ReplicaStats),
}

/// One replica's limiter, as it reports itself after its calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplicaStats {
    pub replica: u32,
    /// What served the calls: `module` or `script` (`None` when direct: no limiter).
    pub backend: Option<String>,
    #[serde(flatten)]
    pub counts: LimiterCounts,
}

/// A limiter's counters (`Limiter::metrics`), or the fleet's, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LimiterCounts {
    pub granted: u64,
    pub pauses: u64,
    pub round_trips: u64,
    /// `MetricsSnapshot::pushback`: cuts that cut the rate, cuts of an episode already cut,
    /// syncs that lowered the bucket and those that changed nothing, reserved calls a pause
    /// held back, pauses that changed nothing (the bucket owed tokens further out).
    pub cuts: u64,
    pub cuts_same_episode: u64,
    pub syncs: u64,
    pub syncs_unchanged: u64,
    pub held_by_pause: u64,
    pub pauses_unchanged: u64,
    /// `MetricsSnapshot::in_flight`, with a cap on calls in flight: calls that found every
    /// slot held and waited for one, and slots whose lease ran out while held.
    pub slot_waits: u64,
    pub leases_lost: u64,
}

impl LimiterCounts {
    pub fn of(m: &redis_throttle::MetricsSnapshot) -> LimiterCounts {
        let (p, in_flight) = (&m.pushback, &m.in_flight);
        LimiterCounts {
            granted: m.granted,
            pauses: m.pauses,
            round_trips: m.round_trips,
            cuts: p.cuts,
            cuts_same_episode: p.cuts_same_episode,
            syncs: p.syncs,
            syncs_unchanged: p.syncs_unchanged,
            held_by_pause: p.held_by_pause,
            pauses_unchanged: p.pauses_unchanged,
            slot_waits: in_flight.waits,
            leases_lost: in_flight.leases_lost,
        }
    }

    /// The replicas' counters, summed.
    pub fn total(stats: &[ReplicaStats]) -> LimiterCounts {
        stats.iter().fold(LimiterCounts::default(), |t, s| {
            let c = &s.counts;
            LimiterCounts {
                granted: t.granted + c.granted,
                pauses: t.pauses + c.pauses,
                round_trips: t.round_trips + c.round_trips,
                cuts: t.cuts + c.cuts,
                cuts_same_episode: t.cuts_same_episode + c.cuts_same_episode,
                syncs: t.syncs + c.syncs,
                syncs_unchanged: t.syncs_unchanged + c.syncs_unchanged,
                held_by_pause: t.held_by_pause + c.held_by_pause,
                pauses_unchanged: t.pauses_unchanged + c.pauses_unchanged,
                slot_waits: t.slot_waits + c.slot_waits,
                leases_lost: t.leases_lost + c.leases_lost,
            }
        })
    }
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

/// One query, timed by the replica. Offsets are from the shared start instant, in µs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    pub replica: u32,
    pub call: u32,
    /// When the task began (about 0: all fire together).
    pub start_us: u64,
    /// Time spent getting tokens from the shared bucket, over every send (0 when direct), and
    /// of it the sleeps the server asked for: the rest is the machine's (round trips, a
    /// timer's lateness).
    pub wait_us: u64,
    pub slept_us: u64,
    /// When the last send went out.
    pub sent_us: u64,
    /// The last send's HTTP status, or 0 when no answer came.
    pub status: u16,
    /// Round trips to Redis for the tokens, over every send.
    pub round_trips: u32,
    /// Why the call failed before an HTTP status, if it did.
    pub error: Option<String>,
    /// Sends (one when direct or when the first was served), and the 429s among them.
    pub sends: u32,
    pub refused: u32,
    /// The pauses its 429s set on the shared bucket: when, and how long they asked for (ms).
    pub pauses: Vec<(u64, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_tagged_json_object_per_line() {
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
            sends: 2,
            refused: 1,
            pauses: vec![(60_000, 1_000)],
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
            counts: LimiterCounts {
                cuts: 2,
                ..LimiterCounts::default()
            },
        });
        let line = serde_json::to_string(&done).unwrap();
        assert!(line.starts_with(r#"{"type":"done","replica":1,"#), "{line}");
        assert!(line.contains(r#","cuts":2,"#), "flat: {line}");
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

//! A subscriber to one shard channel (`SSUBSCRIBE`), as the tests of pause announcements use
//! it: every wait for a message is bounded.

use std::time::Duration;

use redis::{Connection, Value};

/// A subscriber to one shard channel, with a bounded wait for each message.
pub struct Subscriber {
    con: Connection,
}

impl Subscriber {
    #[track_caller]
    pub fn new(mut con: Connection, channel: &str) -> Subscriber {
        let cmd = redis::cmd("SSUBSCRIBE").arg(channel).get_packed_command();
        con.send_packed_command(&cmd).expect("SSUBSCRIBE sent");
        con.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("a read timeout");
        let confirmed = con.recv_response().expect("SSUBSCRIBE confirmed");
        assert_eq!(
            strings(&confirmed).first().map(String::as_str),
            Some("ssubscribe"),
            "{confirmed:?}"
        );
        Subscriber { con }
    }

    /// The next message: `[channel, payload]`, within 10 s.
    #[track_caller]
    pub fn message(&mut self) -> [String; 2] {
        let message = self.con.recv_response().expect("a message within 10 s");
        match strings(&message).as_slice() {
            [kind, channel, payload] if kind == "smessage" => [channel.clone(), payload.clone()],
            _ => panic!("not a shard message: {message:?}"),
        }
    }
}

/// A pause announcement as heard: `<pause_ms> <ticket_us> <factor_bp>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Announced {
    pub channel: String,
    pub pause_ms: u64,
    /// The bucket's state after the call, as a ticket (µs of server time).
    pub ticket_us: i64,
    pub factor_bp: u64,
}

impl Announced {
    /// The state after a pause of `pause_ms` on a bucket of `fill_ms` (capacity x interval)
    /// whose one token costs `cost_ms`, made at server time `now_us`: the first token exactly
    /// at the pause's end.
    pub fn expected_ticket(now_us: i64, pause_ms: u64, fill_ms: u64, cost_ms: u64) -> i64 {
        let after = i64::try_from(pause_ms + fill_ms - cost_ms).expect("a small pause");
        now_us + after * 1000
    }
}

impl Subscriber {
    /// The next message, read as a pause announcement, within 10 s.
    #[track_caller]
    pub fn announcement(&mut self) -> Announced {
        let [channel, payload] = self.message();
        let words: Vec<&str> = payload.split(' ').collect();
        let [pause, ticket, factor] = words.as_slice() else {
            panic!("not an announcement (three words): {payload:?}");
        };
        let number = |word: &str| -> i64 {
            word.parse()
                .unwrap_or_else(|_| panic!("not a number: {word:?} in {payload:?}"))
        };
        Announced {
            channel,
            pause_ms: u64::try_from(number(pause)).expect("a pause of 0 or more"),
            ticket_us: number(ticket),
            factor_bp: u64::try_from(number(factor)).expect("a factor of 0 or more"),
        }
    }
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) | Value::Push { data: items, .. } => items
            .iter()
            .map(|item| match item {
                Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                Value::Int(n) => n.to_string(),
                other => format!("{other:?}"),
            })
            .collect(),
        other => panic!("not an array: {other:?}"),
    }
}

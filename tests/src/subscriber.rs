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

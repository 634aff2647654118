//! An in-memory lease server on tokio's clock, for the partitioned limiter on paused time: keys
//! with an owner and an expiry, answering what the lease protocol sends (SET NX PX, the
//! renewal and release scripts, ROLE, WAIT), and passing the THROTTLE commands of a cap on
//! calls in flight to a [`FakeServer`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, Pipeline, RedisFuture, Value};
use tokio::time::Instant;

use crate::fake::FakeServer;

/// A key's value and when it expires.
type Keys = HashMap<Vec<u8>, (Vec<u8>, Instant)>;

/// Keys with an owner and an expiry on tokio's clock; answers what the lease protocol sends.
#[derive(Clone, Default)]
pub struct FakeLeases {
    keys: Arc<Mutex<Keys>>,
    /// Every request from now on hangs, unanswered.
    pub silent: Arc<AtomicBool>,
    /// Where the THROTTLE commands go (a partitioned limiter's slots), if anywhere.
    throttle: Option<FakeServer>,
}

impl FakeLeases {
    fn execute(&self, args: &[Vec<u8>]) -> Value {
        let now = Instant::now();
        let mut keys = self.keys.lock().unwrap();
        keys.retain(|_, (_, expires)| *expires > now);
        let ms = |bytes: &[u8]| -> u64 { String::from_utf8_lossy(bytes).parse().unwrap() };
        match args.first().map(Vec::as_slice) {
            Some(b"SET") => {
                let (key, value) = (&args[1], &args[2]);
                let nx = args.iter().any(|a| a == b"NX");
                let px = args
                    .iter()
                    .position(|a| a == b"PX")
                    .map(|i| ms(&args[i + 1]));
                if nx && keys.contains_key(key) {
                    return Value::Nil;
                }
                let expires = now + Duration::from_millis(px.unwrap_or(u64::MAX / 4));
                keys.insert(key.clone(), (value.clone(), expires));
                Value::Okay
            }
            Some(b"EVAL") => {
                let script = String::from_utf8_lossy(&args[1]);
                let key = &args[3];
                let ours = keys.get(key).is_some_and(|(owner, _)| *owner == args[4]);
                if script.contains("PEXPIRE") {
                    if ours {
                        keys.get_mut(key).unwrap().1 = now + Duration::from_millis(ms(&args[5]));
                    }
                    Value::Int(i64::from(ours))
                } else if script.contains("DEL") {
                    if ours {
                        keys.remove(key);
                    }
                    Value::Int(i64::from(ours))
                } else {
                    Value::Okay // the pause script: no pause in these tests
                }
            }
            Some(b"ROLE") => Value::Array(vec![
                Value::BulkString(b"master".to_vec()),
                Value::Int(0),
                Value::Array(vec![]),
            ]),
            Some(b"WAIT") => Value::Int(0),
            Some(b"MGET") => Value::Array(vec![Value::Nil, Value::Nil]),
            _ => Value::Nil,
        }
    }

    fn args(cmd: &Cmd) -> Vec<Vec<u8>> {
        cmd.args_iter()
            .map(|arg| match arg {
                Arg::Simple(bytes) => bytes.to_vec(),
                _ => Vec::new(),
            })
            .collect()
    }

    async fn answer<T>(&self, reply: T) -> T {
        if self.silent.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        reply
    }
}

impl FakeLeases {
    /// Leases here, and the THROTTLE commands (a cap's slots) run by `throttle`.
    pub fn with_throttle(throttle: FakeServer) -> FakeLeases {
        FakeLeases {
            throttle: Some(throttle),
            ..FakeLeases::default()
        }
    }
}

impl ConnectionLike for FakeLeases {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let name = cmd.args_iter().next();
        let throttle = matches!(name, Some(Arg::Simple(name)) if name.to_ascii_uppercase().starts_with(b"THROTTLE."));
        if let (true, Some(fake)) = (throttle, self.throttle.clone()) {
            return Box::pin(async move { fake.clone().req_packed_command(cmd).await });
        }
        let reply = self.execute(&Self::args(cmd));
        let fake = self.clone();
        Box::pin(async move { Ok(fake.answer(reply).await) })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        _offset: usize,
        _count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let replies: Vec<Value> = pipeline
            .cmd_iter()
            .map(|cmd| self.execute(&Self::args(cmd)))
            .collect();
        let fake = self.clone();
        Box::pin(async move { Ok(fake.answer(replies).await) })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

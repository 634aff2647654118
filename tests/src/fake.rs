//! An in-memory server of the module's one-key commands (TAKE, PEEK, PAUSE, GIVE, CUT, SYNC,
//! DEBIT) and of MTAKE on tokio's clock, with the module's own arithmetic and definitions
//! (`throttle_bucket`): the client's waiting loop runs against it on paused time, so those
//! tests never really sleep.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
use throttle_bucket::spec::Keys;
use throttle_bucket::{
    Command, CutArgs, DebitArgs, Effects, GiveArgs, MTakeArgs, PauseArgs, PeekArgs, QuotaArgs,
    ReleaseArgs, RenewArgs, ResumeArgs, SlotsArgs, State as Bucket, SyncArgs, TakeArgs,
    ThrottleCommand, Write,
};
use tokio::time::Instant;

/// The fake server's clock starts at this Unix time (ns), plus tokio's elapsed time.
const EPOCH_NS: i64 = 1_700_000_000 * 1_000_000_000;

/// One command the fake ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// When it ran, from the fake's creation.
    pub at: Duration,
    pub tokens: u64,
    pub max_wait_ms: u64,
    pub reply: [i64; 4],
}

/// The fake server: a connection to it, cloned, is the same server.
#[derive(Clone)]
pub struct FakeServer {
    state: Arc<Mutex<State>>,
    /// Each way: the command runs `latency` after it is sent, the reply arrives `latency`
    /// after that.
    latency: Duration,
}

struct State {
    origin: Instant,
    buckets: HashMap<Vec<u8>, Bucket>,
    calls: Vec<Call>,
}

impl Default for FakeServer {
    fn default() -> FakeServer {
        FakeServer::new()
    }
}

impl FakeServer {
    /// A fake that answers at once.
    pub fn new() -> FakeServer {
        FakeServer::with_latency(Duration::ZERO)
    }

    /// A fake whose every command runs `latency` after it is sent, its reply arriving
    /// `latency` after that.
    pub fn with_latency(latency: Duration) -> FakeServer {
        FakeServer {
            state: Arc::new(Mutex::new(State {
                origin: Instant::now(),
                buckets: HashMap::new(),
                calls: Vec::new(),
            })),
            latency,
        }
    }

    /// Every command run so far.
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// The instant a bucket is full again, as stored (`None`: no key, a full bucket).
    pub fn stored(&self, key: &str) -> Option<i64> {
        self.bucket(key).map(|b| b.tat)
    }

    /// A bucket's whole stored state, its pause and cut included.
    pub fn bucket(&self, key: &str) -> Option<Bucket> {
        self.state
            .lock()
            .unwrap()
            .buckets
            .get(key.as_bytes())
            .cloned()
    }

    /// Time since the fake was made, on tokio's clock.
    pub fn elapsed(&self) -> Duration {
        self.state.lock().unwrap().origin.elapsed()
    }

    fn execute(&self, args: Vec<Vec<u8>>) -> Result<Value, RedisError> {
        let [name, words @ ..] = args.as_slice() else {
            return error("ERR wrong number of arguments".to_owned());
        };
        let words: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        let command = Command::ALL
            .into_iter()
            .find(|c| name.eq_ignore_ascii_case(c.name().as_bytes()));
        match command {
            Some(Command::Take) => {
                let (at, parsed, outcome, reply) = self.run::<TakeArgs>(&words)?;
                self.state.lock().unwrap().calls.push(Call {
                    at,
                    tokens: parsed.tokens,
                    max_wait_ms: parsed.max_wait_ms,
                    reply: outcome.reply(),
                });
                Ok(reply)
            }
            Some(Command::MTake) => self.run::<MTakeArgs>(&words).map(|r| r.3),
            Some(Command::Pause) => self.run::<PauseArgs>(&words).map(|r| r.3),
            Some(Command::Give) => self.run::<GiveArgs>(&words).map(|r| r.3),
            Some(Command::Peek) => self.run::<PeekArgs>(&words).map(|r| r.3),
            Some(Command::Cut) => self.run::<CutArgs>(&words).map(|r| r.3),
            Some(Command::Sync) => self.run::<SyncArgs>(&words).map(|r| r.3),
            Some(Command::Debit) => self.run::<DebitArgs>(&words).map(|r| r.3),
            Some(Command::Renew) => self.run::<RenewArgs>(&words).map(|r| r.3),
            Some(Command::Release) => self.run::<ReleaseArgs>(&words).map(|r| r.3),
            Some(Command::Slots) => self.run::<SlotsArgs>(&words).map(|r| r.3),
            Some(Command::Resume) => self.run::<ResumeArgs>(&words).map(|r| r.3),
            Some(Command::Quota) => self.run::<QuotaArgs>(&words).map(|r| r.3),
            None => {
                let name = String::from_utf8_lossy(name).to_ascii_uppercase();
                error(format!("ERR unknown command '{name}'"))
            }
        }
    }

    /// Runs `C` on `words` (after the command name): its keys read, its arithmetic at the
    /// fake's time, its writes stored, its reply. Also what the call was and decided, and when.
    #[allow(clippy::type_complexity)]
    fn run<C: ThrottleCommand>(
        &self,
        words: &[&[u8]],
    ) -> Result<(Duration, C, C::Outcome, Value), RedisError> {
        let (keys, parsed) = match C::spec().keys {
            Keys::One(_) => {
                let [key, rest @ ..] = words else {
                    return error(throttle_bucket::ArgError::Arity(C::COMMAND).to_string());
                };
                (std::slice::from_ref(key), C::parse(rest))
            }
            // numkeys, then the keys: `parse` reads them all, and checks there are as many.
            Keys::Counted(_) => {
                let parsed = C::parse(words);
                let count = parsed.as_ref().map_or(0, C::keys);
                (words.get(1..=count).unwrap_or(&[]), parsed)
            }
        };
        let parsed = parsed.or_else(|e| error(e.to_string()))?;
        let mut state = self.state.lock().unwrap();
        let at = state.origin.elapsed();
        let now_ns = EPOCH_NS + i64::try_from(at.as_nanos()).unwrap();
        let stored: Vec<Option<Bucket>> = keys
            .iter()
            .map(|key| state.buckets.get(*key).cloned())
            .collect();
        let outcome = parsed
            .apply(&stored, now_ns)
            .or_else(|e| error(e.to_string()))?;
        for (i, key) in keys.iter().enumerate() {
            match outcome.write(i) {
                Some(Write::Store { state: bucket, .. }) => {
                    state.buckets.insert(key.to_vec(), bucket.clone());
                }
                Some(Write::Delete) => {
                    state.buckets.remove(*key);
                }
                None => {}
            }
        }
        let ints = parsed.reply(&outcome);
        let reply = match (C::INTEGER_REPLY, ints.as_ref()) {
            (true, [value]) => Value::Int(*value),
            (_, values) => Value::Array(values.iter().copied().map(Value::Int).collect()),
        };
        Ok((at, parsed, outcome, reply))
    }
}

/// An error reply as the server sends it (`ERR` and the rest).
fn error<T>(message: String) -> Result<T, RedisError> {
    let detail = message.strip_prefix("ERR ").unwrap_or(&message).to_owned();
    Err(redis::make_extension_error("ERR".to_owned(), Some(detail)))
}

impl ConnectionLike for FakeServer {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let args: Vec<Vec<u8>> = cmd
            .args_iter()
            .map(|arg| match arg {
                Arg::Simple(bytes) => bytes.to_vec(),
                _ => b"0".to_vec(),
            })
            .collect();
        let fake = self.clone();
        Box::pin(async move {
            if !fake.latency.is_zero() {
                tokio::time::sleep(fake.latency).await;
            }
            let reply = fake.execute(args);
            if !fake.latency.is_zero() {
                tokio::time::sleep(fake.latency).await;
            }
            reply
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        _pipeline: &'a Pipeline,
        _offset: usize,
        _count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async { Err((ErrorKind::Client, "the fake server runs no pipelines").into()) })
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(fake: &FakeServer, text: &str) -> Result<Value, RedisError> {
        fake.execute(
            text.split_whitespace()
                .map(|w| w.as_bytes().to_vec())
                .collect(),
        )
    }

    fn ints_of(value: Value) -> Vec<i64> {
        match value {
            Value::Array(items) => items
                .into_iter()
                .map(|v| match v {
                    Value::Int(n) => n,
                    other => panic!("not an integer: {other:?}"),
                })
                .collect(),
            other => panic!("not an array: {other:?}"),
        }
    }

    /// The fake's MTAKE replies the module's tickets (each key's state in µs), which its GIVE
    /// takes back; a denial replies 0s and writes nothing; its errors are the module's.
    #[test]
    fn mtake_tickets_give_each_key_back() {
        let fake = FakeServer::new();
        let call = "THROTTLE.MTAKE 2 a b 10 0.01 3 5 0.001 2";
        let reply = ints_of(run(&fake, &format!("{call} TICKET")).unwrap());
        let states = [fake.stored("a").unwrap(), fake.stored("b").unwrap()];
        assert_eq!(reply[..3], [1, 0, 7]);
        assert_eq!(reply[6..], states.map(|s| s / 1000), "{reply:?}");
        for (key, quota, n, ticket) in
            [("a", "10 0.01", 3, reply[6]), ("b", "5 0.001", 2, reply[7])]
        {
            let given = run(&fake, &format!("THROTTLE.GIVE {key} {quota} {n} {ticket}"));
            assert_eq!(given.unwrap(), Value::Int(n), "{key}");
            assert_eq!(fake.stored(key), None, "{key} full again");
        }
        assert_eq!(
            ints_of(run(&fake, call).unwrap()).len(),
            6,
            "no TICKET, no tickets"
        );

        let before = [fake.stored("a"), fake.stored("b")];
        let denied =
            ints_of(run(&fake, "THROTTLE.MTAKE 2 a b 10 0.01 10 5 0.001 1 TICKET").unwrap());
        // Every ticket 0, then what held it back: the tokens (1).
        assert_eq!((denied[0], &denied[6..]), (0, &[0, 0, 1][..]), "{denied:?}");
        assert_eq!(
            [fake.stored("a"), fake.stored("b")],
            before,
            "a denial wrote"
        );

        let error = run(&fake, &format!("{call} TICKET ticket")).unwrap_err();
        assert_eq!(error.detail(), Some("TICKET is given more than once"));
    }
}

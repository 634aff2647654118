//! An in-memory server of the module's one-key commands (TAKE, PEEK, PAUSE, GIVE, CUT, SYNC,
//! DEBIT) on tokio's clock, with the module's own arithmetic and definitions
//! (`throttle_bucket`): the client's waiting loop runs against it on paused time, so those
//! tests never really sleep.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::{Arg, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, Value};
use throttle_bucket::{
    CutArgs, DebitArgs, GiveArgs, PauseArgs, PeekArgs, State as Bucket, SyncArgs, TakeArgs, Write,
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
            .copied()
    }

    /// Time since the fake was made, on tokio's clock.
    pub fn elapsed(&self) -> Duration {
        self.state.lock().unwrap().origin.elapsed()
    }

    fn execute(&self, args: Vec<Vec<u8>>) -> Result<Value, RedisError> {
        let error = |message: String| {
            let detail = message.strip_prefix("ERR ").unwrap_or(&message).to_owned();
            Err(redis::make_extension_error("ERR".to_owned(), Some(detail)))
        };
        let [name, key, rest @ ..] = args.as_slice() else {
            return error("ERR wrong number of arguments".to_owned());
        };
        let rest: Vec<&[u8]> = rest.iter().map(Vec::as_slice).collect();
        let mut state = self.state.lock().unwrap();
        let at = state.origin.elapsed();
        let now_ns = EPOCH_NS + i64::try_from(at.as_nanos()).unwrap();
        let stored = state.buckets.get(key).copied();
        let ints = |values: &[i64]| {
            Ok(Value::Array(
                values.iter().copied().map(Value::Int).collect(),
            ))
        };
        let name = String::from_utf8_lossy(name).to_ascii_uppercase();
        let mut write = |write: Option<Write>| match write {
            Some(Write::Store { state: bucket, .. }) => {
                state.buckets.insert(key.clone(), bucket);
            }
            Some(Write::Delete) => {
                state.buckets.remove(key);
            }
            None => {}
        };
        match name.as_str() {
            "THROTTLE.TAKE" => {
                let parsed = match TakeArgs::parse(&rest) {
                    Ok(parsed) => parsed,
                    Err(e) => return error(e.to_string()),
                };
                let outcome = throttle_bucket::take(&parsed, stored, now_ns);
                write(outcome.write);
                state.calls.push(Call {
                    at,
                    tokens: parsed.tokens,
                    max_wait_ms: parsed.max_wait_ms,
                    reply: outcome.reply(),
                });
                ints(outcome.to_reply(&parsed).ints().as_slice())
            }
            "THROTTLE.PEEK" => match PeekArgs::parse(&rest) {
                Ok(parsed) => {
                    let outcome = throttle_bucket::peek(&parsed.quota, stored, now_ns);
                    ints(outcome.reply().ints().as_slice())
                }
                Err(e) => error(e.to_string()),
            },
            "THROTTLE.PAUSE" => match PauseArgs::parse(&rest) {
                Ok(parsed) => {
                    let outcome = throttle_bucket::pause(&parsed, stored, now_ns);
                    write(outcome.write);
                    Ok(Value::Int(outcome.reply()))
                }
                Err(e) => error(e.to_string()),
            },
            "THROTTLE.GIVE" => match GiveArgs::parse(&rest) {
                Ok(parsed) => {
                    let outcome = throttle_bucket::give(&parsed, stored, now_ns);
                    write(outcome.write);
                    Ok(Value::Int(i64::try_from(outcome.given).unwrap()))
                }
                Err(e) => error(e.to_string()),
            },
            "THROTTLE.CUT" => match CutArgs::parse(&rest) {
                Ok(parsed) => {
                    let outcome = throttle_bucket::cut(&parsed, stored, now_ns);
                    write(outcome.write);
                    ints(outcome.reply().ints().as_slice())
                }
                Err(e) => error(e.to_string()),
            },
            "THROTTLE.SYNC" => match SyncArgs::parse(&rest) {
                Ok(parsed) => {
                    let outcome = throttle_bucket::sync(&parsed, stored, now_ns);
                    write(outcome.write);
                    ints(outcome.reply().ints().as_slice())
                }
                Err(e) => error(e.to_string()),
            },
            "THROTTLE.DEBIT" => match DebitArgs::parse(&rest) {
                Ok(parsed) => match throttle_bucket::debit(&parsed, stored, now_ns) {
                    Ok(outcome) => {
                        write(outcome.write);
                        ints(outcome.reply().ints().as_slice())
                    }
                    Err(e) => error(e.to_string()),
                },
                Err(e) => error(e.to_string()),
            },
            _ => error(format!("ERR unknown command '{name}'")),
        }
    }
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

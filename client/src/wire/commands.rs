//! The THROTTLE commands one by one, over the backend dispatch: what every limiter operation
//! sends through, and [`Commands`] for a caller that wants a command itself (an operator's
//! tool, a test). A command is its arguments ([`ThrottleCommand`]): they write its words and
//! read its reply back, in the shape their own options make.

use std::sync::Arc;

use redis::aio::ConnectionLike;
use throttle_bucket::ThrottleCommand;

use crate::wire::backend::{Call, Dispatch};
use crate::wire::reply;
use crate::{Backend, Error};

/// The command `args` on `keys` (one, or THROTTLE.MTAKE's) through `dispatch`, its reply read
/// back by `args`, and the round trips it took.
pub(crate) async fn call<C: ConnectionLike, A: ThrottleCommand>(
    dispatch: &Dispatch,
    conn: &mut C,
    keys: &[&str],
    args: &A,
) -> (Result<A::Reply, Error>, u32) {
    let call = Call {
        command: A::COMMAND,
        keys,
        args: args.words(),
    };
    let (value, trips) = dispatch.send(conn, &call).await;
    (value.and_then(|value| reply::decode(args, &value)), trips)
}

/// The THROTTLE commands on a connection, each on the [`Backend`] chosen (under
/// [`Backend::Auto`] the first call probes, as a limiter's does), its reply read back by the
/// call itself.
///
/// ```no_run
/// use redis_throttle::throttle_bucket::{PauseArgs, PeekArgs, Quota};
/// use redis_throttle::{Backend, Commands};
///
/// # async fn run(conn: redis::aio::MultiplexedConnection) -> Result<(), Box<dyn std::error::Error>> {
/// let commands = Commands::new(conn, Backend::Auto);
/// let quota = Quota::parse(b"10", b"10")?;
/// // THROTTLE.PAUSE quota:payments 10 10 30000: ms until the next token.
/// let next_ms = commands.call("quota:payments", &PauseArgs { quota, pause_ms: 30_000 }).await?;
/// let seen = commands.call("quota:payments", &PeekArgs { quota }).await?;
/// assert!(seen.paused_ms > 0 && next_ms >= 30_000);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct Commands<C> {
    conn: C,
    dispatch: Arc<Dispatch>,
}

impl<C: ConnectionLike + Clone> Commands<C> {
    /// The commands on `conn`, sent to `backend`.
    pub fn new(conn: C, backend: Backend) -> Commands<C> {
        Commands {
            conn,
            dispatch: Arc::new(Dispatch::new(backend)),
        }
    }

    /// What serves the calls: the backend chosen, or under [`Backend::Auto`] what the first
    /// call found (`Auto` until then).
    pub fn backend(&self) -> Backend {
        self.dispatch.serving()
    }

    /// The command `args` on `key`, and its reply. [`Error::UnexpectedReply`] for a reply of
    /// another shape than the call's.
    pub async fn call<A: ThrottleCommand>(&self, key: &str, args: &A) -> Result<A::Reply, Error> {
        self.call_keys(&[key], args).await
    }

    /// One command on many buckets in one pipeline (one round trip): each `(key, args)`'s
    /// reply, or its own error (a key that is not a bucket fails alone). `Err` when the
    /// pipeline itself failed (the connection). An operator's view of many quotas reads them
    /// this way.
    pub async fn call_each<A: ThrottleCommand>(
        &self,
        calls: &[(&str, A)],
    ) -> Result<Vec<Result<A::Reply, Error>>, Error> {
        let keys: Vec<[&str; 1]> = calls.iter().map(|(key, _)| [*key]).collect();
        let wire: Vec<Call<'_>> = calls
            .iter()
            .zip(&keys)
            .map(|((_, args), key)| Call {
                command: A::COMMAND,
                keys: key,
                args: args.words(),
            })
            .collect();
        let mut conn = self.conn.clone();
        let values = self.dispatch.send_each(&mut conn, &wire).await?;
        Ok(values
            .into_iter()
            .zip(calls)
            .map(|(value, (_, args))| value.and_then(|value| reply::decode(args, &value)))
            .collect())
    }

    /// The command `args` on `keys`: THROTTLE.MTAKE's, in the order of its limits.
    pub async fn call_keys<A: ThrottleCommand>(
        &self,
        keys: &[&str],
        args: &A,
    ) -> Result<A::Reply, Error> {
        let mut conn = self.conn.clone();
        call(&self.dispatch, &mut conn, keys, args).await.0
    }
}

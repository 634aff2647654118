//! The incident verbs, `pause`, `cut` and `sync`: one command on one bucket, and what the fleet
//! will do now, from the server's reply.

use redis::Value;

use crate::args::{seconds, Duration, QuotaArg};
use crate::failure::{fail, redis_failure, Failure};
use crate::server::{not_a_bucket, Server};
use crate::status::{quota_of, reports_of};

/// `throttle pause KEY DURATION`.
pub(crate) async fn pause(
    server: &mut Server,
    key: &str,
    duration: Duration,
    quota: Option<QuotaArg>,
) -> Result<String, Failure> {
    let mut cmd = command(server, "pause", key, quota).await?;
    cmd.arg(duration.ms);
    let next_ms: u64 = send(server, key, &cmd).await?;
    Ok(format!(
        "{key} paused: no call before {} from now (server says {next_ms} ms until the next token; asked {} ms)\n",
        seconds(next_ms),
        duration.ms
    ))
}

/// `throttle cut KEY FACTOR FOR`.
pub(crate) async fn cut(
    server: &mut Server,
    key: &str,
    factor: &str,
    recovery: Duration,
    pause: Duration,
    quota: Option<QuotaArg>,
) -> Result<String, Failure> {
    let mut cmd = command(server, "cut", key, quota).await?;
    cmd.arg(pause.ms).arg(factor).arg(recovery.ms);
    let reply: Vec<u64> = send(server, key, &cmd).await?;
    let &[cut, next_ms, factor_bp, recovered_ms] = reply.as_slice() else {
        return fail(format!("an unexpected CUT reply: {reply:?}"));
    };
    let factor_now = format!("x{}.{:02}", factor_bp / 10_000, factor_bp % 10_000 / 100);
    let what = if cut == 1 {
        format!("{key} cut: the rate is {factor_now} now ({factor_bp} bp)")
    } else {
        format!(
            "{key} was paused (a pause or cut not over), so the same episode: only paused, the rate not cut again; it is {factor_now} ({factor_bp} bp)"
        )
    };
    let back = if recovered_ms == 0 {
        "not cut".to_owned()
    } else {
        format!("back to the full rate in {}", seconds(recovered_ms))
    };
    Ok(format!(
        "{what}, {back}; no call before {} from now (server says {next_ms} ms)\n",
        seconds(next_ms)
    ))
}

/// `throttle sync KEY REMAINING RESET`.
pub(crate) async fn sync(
    server: &mut Server,
    key: &str,
    remaining: u64,
    reset: Duration,
    quota: Option<QuotaArg>,
) -> Result<String, Failure> {
    let mut cmd = command(server, "sync", key, quota).await?;
    cmd.arg(remaining).arg(reset.ms);
    let reply: Vec<u64> = send(server, key, &cmd).await?;
    let &[lowered, left, reset_ms] = reply.as_slice() else {
        return fail(format!("an unexpected SYNC reply: {reply:?}"));
    };
    let full = if reset_ms == 0 {
        "full".to_owned()
    } else {
        format!("full in {}", seconds(reset_ms))
    };
    Ok(if lowered == 0 {
        format!(
            "{key} unchanged: it holds {left} token(s), no more than the supplier's {remaining} (a sync never raises a bucket); {full}\n"
        )
    } else if remaining == 0 && reset.ms > 0 {
        format!(
            "{key} emptied and paused until the supplier's reset: no call before {} from now; {left} token(s), {full}\n",
            seconds(reset.ms)
        )
    } else {
        format!("{key} lowered: {left} token(s) now, {full}\n")
    })
}

/// The command on `key`, with the quota given or reported.
async fn command(
    server: &mut Server,
    name: &str,
    key: &str,
    quota: Option<QuotaArg>,
) -> Result<redis::Cmd, Failure> {
    let backend = server.backend().await?;
    let (capacity, rate) = match quota {
        Some(quota) => (quota.capacity, quota.rate),
        None => match quota_of(&reports_of(server, key).await?) {
            Some((quota, _)) => quota,
            None => {
                return fail(format!(
                    "no process reports {key:?}, so its quota is unknown: pass --quota CAPACITY/RATE (the one the fleet uses)"
                ))
            }
        },
    };
    Ok(backend.command(name, key, capacity, &rate))
}

/// Sends `cmd`; a key that is not a bucket, or any refusal, is a failure that says so.
async fn send<T: redis::FromRedisValue>(
    server: &mut Server,
    key: &str,
    cmd: &redis::Cmd,
) -> Result<T, Failure> {
    let reply: Result<Value, redis::RedisError> = cmd.query_async(&mut server.con).await;
    let refusal = match reply {
        Ok(Value::ServerError(err)) => err.to_string(),
        Ok(reply) => {
            return redis::from_redis_value(reply)
                .map_err(|err| Failure(format!("an unexpected reply from {}: {err}", server.url)))
        }
        Err(err) if err.is_io_error() || err.is_timeout() || err.is_connection_dropped() => {
            return Err(redis_failure(&server.url, "the command", &err))
        }
        Err(err) => err.to_string(),
    };
    fail(if not_a_bucket(&refusal) {
        format!("{key:?} is not a THROTTLE bucket ({refusal}); check the key")
    } else {
        format!("{}: the server refused the command: {refusal}", server.url)
    })
}

//! The incident verbs, `pause`, `cut`, `sync` and `resume`: one command on one bucket, and what
//! the fleet will do now, from the server's reply.

use redis_throttle::throttle_bucket::{
    CutArgs, PauseArgs, Quota, ResumeArgs, SyncArgs, ThrottleCommand,
};
use redis_throttle::{Commands, Error};

use crate::args::{seconds, Duration, QuotaArg};
use crate::failure::{fail, redis_failure, Failure};
use crate::server::{not_a_bucket, Backend, Server};
use crate::status::{quota_of, reports_of};

/// `throttle pause KEY DURATION`.
pub(crate) async fn pause(
    server: &mut Server,
    key: &str,
    duration: Duration,
    quota: Option<QuotaArg>,
) -> Result<String, Failure> {
    let (commands, quota) = commands(server, key, quota).await?;
    let args = PauseArgs {
        quota,
        pause_ms: duration.ms,
    };
    let next_ms = call(server, &commands, key, &args).await?;
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
    let (commands, quota) = commands(server, key, quota).await?;
    // The factor as the user wrote it, checked as the server checks it.
    let args: CutArgs = parsed(
        server,
        &quota,
        &[&pause.ms.to_string(), factor, &recovery.ms.to_string()],
    )?;
    let reply = call(server, &commands, key, &args).await?;
    let (next_ms, factor_bp, recovered_ms) = (reply.next_ms, reply.factor_bp, reply.recovered_ms);
    let factor_now = format!("x{}.{:02}", factor_bp / 10_000, factor_bp % 10_000 / 100);
    let what = if reply.cut {
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
    let (commands, quota) = commands(server, key, quota).await?;
    let args = SyncArgs {
        quota,
        remaining,
        reset_ms: reset.ms,
    };
    let reply = call(server, &commands, key, &args).await?;
    let (lowered, left, reset_ms) = (reply.lowered, reply.remaining, reply.reset_ms);
    let full = if reset_ms == 0 {
        "full".to_owned()
    } else {
        format!("full in {}", seconds(reset_ms))
    };
    Ok(if !lowered {
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

/// `throttle resume KEY`: ends a pause or a cut early, where DEL would refill the bucket and
/// drop the slots held.
pub(crate) async fn resume(
    server: &mut Server,
    key: &str,
    quota: Option<QuotaArg>,
) -> Result<String, Failure> {
    let (commands, quota) = commands(server, key, quota).await?;
    let ended = call(server, &commands, key, &ResumeArgs { quota }).await?;
    Ok(if ended {
        format!(
            "{key} resumed: no pause and no cut from now; its tokens and the slots held are as they were (a resume never refills)\n"
        )
    } else {
        format!("{key} was neither paused nor cut: nothing to resume, nothing written\n")
    })
}

/// The commands on the backend the server has, and `key`'s quota, given or reported.
async fn commands(
    server: &mut Server,
    key: &str,
    quota: Option<QuotaArg>,
) -> Result<(Commands<redis::aio::MultiplexedConnection>, Quota), Failure> {
    let backend = match server.backend().await? {
        Backend::Module => redis_throttle::Backend::Module,
        Backend::Library => redis_throttle::Backend::Library,
    };
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
    let quota = Quota::parse(capacity.to_string().as_bytes(), rate.as_bytes())
        .map_err(|err| refused(server, key, &err.to_string()))?;
    Ok((Commands::new(server.con.clone(), backend), quota))
}

/// The command whose words after the key are `quota` then `words`, checked as the server
/// checks them (a refusal reads as the server's).
fn parsed<A: ThrottleCommand>(
    server: &Server,
    quota: &Quota,
    words: &[&str],
) -> Result<A, Failure> {
    let mut all: Vec<String> = quota.words().iter().map(|w| w.to_text()).collect();
    all.extend(words.iter().map(|w| (*w).to_owned()));
    let bytes: Vec<&[u8]> = all.iter().map(String::as_bytes).collect();
    A::parse(&bytes).map_err(|err| refused(server, "", &err.to_string()))
}

/// The command `args` on `key`, and its reply; a key that is not a bucket, or any refusal, is a
/// failure that says so.
async fn call<A: ThrottleCommand>(
    server: &Server,
    commands: &Commands<redis::aio::MultiplexedConnection>,
    key: &str,
    args: &A,
) -> Result<A::Reply, Failure> {
    commands.call(key, args).await.map_err(|err| match err {
        Error::Connection(err) => redis_failure(&server.url, "the command", &err),
        Error::Rejected { message } => refused(server, key, &message),
        other => Failure(format!("{}: {other}", server.url)),
    })
}

/// The server's refusal of a command on `key`.
fn refused(server: &Server, key: &str, refusal: &str) -> Failure {
    Failure(if not_a_bucket(refusal) {
        format!("{key:?} is not a THROTTLE bucket ({refusal}); check the key")
    } else {
        format!("{}: the server refused the command: {refusal}", server.url)
    })
}

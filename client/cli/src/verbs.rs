//! The incident verbs, `pause`, `cut`, `sync` and `resume`: one command on one bucket, and what
//! the fleet will do now, from the server's reply.

use redis_throttle::report::Report;
use redis_throttle::throttle_bucket::{
    CutArgs, PauseArgs, Quota, QuotaArgs, ResumeArgs, SyncArgs, ThrottleCommand,
};
use redis_throttle::{Commands, Error};

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
    force: bool,
) -> Result<String, Failure> {
    let reports = reports(server, key, &quota, force).await?;
    let (commands, quota) = commands(server, key, quota, &reports).await?;
    outlasts_deadlines(key, &reports, duration.ms, force, "pause")?;
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
    force: bool,
) -> Result<String, Failure> {
    let reports = reports(server, key, &quota, force).await?;
    let (commands, quota) = commands(server, key, quota, &reports).await?;
    // The factor as the user wrote it, checked as the server checks it.
    let args: CutArgs = parsed(
        server,
        &quota,
        &[&pause.ms.to_string(), factor, &recovery.ms.to_string()],
    )?;
    outlasts_deadlines(key, &reports, pause.ms, force, "cut")?;
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
    // No check of the fleet's deadlines (the supplier's reset is not the operator's choice):
    // the reports are read only for a quota not given, as `force` has them.
    let reports = reports(server, key, &quota, true).await?;
    let (commands, quota) = commands(server, key, quota, &reports).await?;
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

/// The reports of `key`: for its quota when none is given, and for its processes' deadlines
/// unless `force` says to pause anyway (then, with a quota given, none are read).
async fn reports(
    server: &mut Server,
    key: &str,
    quota: &Option<QuotaArg>,
    force: bool,
) -> Result<Vec<Report>, Failure> {
    if force && quota.is_some() {
        return Ok(Vec::new());
    }
    reports_of(server, key).await
}

/// Refuses, unless `force`, a pause of `pause_ms` at least as long as a reporting process's
/// `max_wait`: such a process's calls would fail with DeadlineExceeded at once while more
/// than its `max_wait` of the pause is left (a call gives up on a wait past its deadline). A
/// report without `max_wait` (an older client) says nothing; no report, nothing to say.
fn outlasts_deadlines(
    key: &str,
    reports: &[Report],
    pause_ms: u64,
    force: bool,
    verb: &str,
) -> Result<(), Failure> {
    if force {
        return Ok(());
    }
    let failing: Vec<(&str, u64)> = reports
        .iter()
        .filter_map(|r| Some((r.process.as_str(), r.max_wait_ms?)))
        .filter(|&(_, max_wait_ms)| pause_ms >= max_wait_ms)
        .collect();
    let (Some(least), Some(most)) = (
        failing.iter().map(|f| f.1).min(),
        failing.iter().map(|f| f.1).max(),
    ) else {
        return Ok(());
    };
    let mut processes: Vec<&str> = failing.iter().map(|f| f.0).collect();
    processes.sort_unstable();
    processes.dedup();
    let waits = if least == most {
        short(most)
    } else {
        format!("{} to {}", short(least), short(most))
    };
    let (who, wait, their) = match processes.len() {
        1 => ("1 process".to_owned(), "waits", "its"),
        n => (format!("{n} processes"), "wait", "their"),
    };
    fail(format!(
        "{who} on {key} {wait} at most {waits} for a call (max_wait): {their} calls will fail with DeadlineExceeded during this {} pause (every call while more than {waits} of it is left); add --force to {verb} anyway",
        short(pause_ms)
    ))
}

/// `ms` as a duration is written on the command line: `90s`, `1.5s`, `500ms`.
fn short(ms: u64) -> String {
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else if ms < 1000 {
        format!("{ms}ms")
    } else {
        let text = format!("{}.{:03}", ms / 1000, ms % 1000);
        format!("{}s", text.trim_end_matches('0'))
    }
}

/// `throttle resume KEY`: ends a pause or a cut early, where DEL would refill the bucket and
/// drop the slots held.
pub(crate) async fn resume(
    server: &mut Server,
    key: &str,
    quota: Option<QuotaArg>,
) -> Result<String, Failure> {
    // Resuming shortens a pause: no deadline to check; the reports only for a quota not given.
    let reports = reports(server, key, &quota, true).await?;
    let (commands, quota) = commands(server, key, quota, &reports).await?;
    let ended = call(server, &commands, key, &ResumeArgs { quota }).await?;
    Ok(if ended {
        format!(
            "{key} resumed: no pause and no cut from now; its tokens and the slots held are as they were (a resume never refills)\n"
        )
    } else {
        format!("{key} was neither paused nor cut: nothing to resume, nothing written\n")
    })
}

/// `throttle quota KEY CAPACITY/RATE` and `throttle quota KEY --clear`.
pub(crate) async fn quota(
    server: &mut Server,
    key: &str,
    quota: Option<QuotaArg>,
    clear: bool,
) -> Result<String, Failure> {
    if quota.is_none() && !clear {
        return fail(format!(
            "give the quota to keep for {key:?}, like `throttle quota {key} 20/20`, or --clear \
             to give the key back to its callers' quotas"
        ));
    }
    let reports = reports(server, key, &quota, true).await?;
    if quota.is_none() && quota_of(&reports).is_none() {
        return fail(format!(
            "no process reports {key:?}, so the quota its callers send is unknown: give it, \
             like `throttle quota {key} 10/10 --clear`"
        ));
    }
    let (commands, quota) = commands(server, key, quota, &reports).await?;
    let reply = call(server, &commands, key, &QuotaArgs { quota, clear }).await?;
    let (capacity, rate) = (quota.capacity, quota.rate());
    let now = format!(
        "the bucket holds {} now, full in {}",
        reply.remaining,
        seconds(reply.reset_ms)
    );
    Ok(match (clear, reply.changed) {
        (false, true) => format!(
            "{key}: quota {capacity}/{rate} kept at the server: every process on it takes at {rate} per second with bursts of {capacity} from its next call, whatever its own quota; {now} (clear it with throttle quota {key} --clear)\n"
        ),
        (false, false) => format!(
            "{key} already keeps the quota {capacity}/{rate}: nothing written; {now}\n"
        ),
        (true, true) => format!(
            "{key}: no quota kept at the server: each process takes at its own quota from its next call; {now} at {capacity}/{rate}\n"
        ),
        (true, false) => format!(
            "{key} keeps no quota at the server: nothing to clear, nothing written\n"
        ),
    })
}

/// The commands on the backend the server has, and `key`'s quota, given or reported.
async fn commands(
    server: &mut Server,
    key: &str,
    quota: Option<QuotaArg>,
    reports: &[Report],
) -> Result<(Commands<redis::aio::MultiplexedConnection>, Quota), Failure> {
    let backend = server.backend().await?;
    let (capacity, rate) = match quota {
        Some(quota) => (quota.capacity, quota.rate),
        None => match quota_of(reports) {
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
    Ok((server.commands(backend), quota))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn report(process: &str, max_wait_ms: Option<u64>) -> Report {
        let mut report = Report::parse(&format!("v1 at=1 process={process} key=k")).unwrap();
        report.max_wait_ms = max_wait_ms;
        report
    }

    #[test]
    fn a_pause_as_long_as_a_deadline_is_refused_once_per_process() {
        let reports = [
            report("a", Some(30_000)),
            report("a", Some(30_000)),
            report("b", Some(60_000)),
            report("c", None),
            report("d", Some(120_000)),
        ];
        assert!(outlasts_deadlines("k", &reports, 29_999, false, "pause").is_ok());
        assert!(outlasts_deadlines("k", &reports, 90_000, true, "pause").is_ok());
        let refused = outlasts_deadlines("k", &reports, 60_000, false, "cut").unwrap_err();
        assert_eq!(
            refused.0,
            "2 processes on k wait at most 30s to 60s for a call (max_wait): their calls will \
             fail with DeadlineExceeded during this 60s pause (every call while more than 30s to \
             60s of it is left); add --force to cut anyway"
        );
        assert!(outlasts_deadlines("k", &[report("c", None)], 90_000, false, "pause").is_ok());
        assert_eq!(
            (short(1500), short(500), short(1_250)),
            ("1.5s".into(), "500ms".into(), "1.25s".into())
        );
    }
}

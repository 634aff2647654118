//! Throughput: redis-benchmark runs of every workload, interleaved, at pipelining 1 and 16;
//! medians, ratios against INCR in the same repetition, server time from INFO commandstats.
//! With `--redis-cell`, redis-cell's CL.THROTTLE under the same quotas joins the rotation.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;

use redis::{Connection, Value};
use throttle_benches::{median, parse_benchmark_csv, parse_commandstats, CommandStat};
use throttle_testkit::Server;

use crate::child::run_bounded;
use crate::{words, Options, CHILD_TIMEOUT, STATE_LIKE_INT};

/// Pipelining depths measured.
const PIPELINES: [u32; 2] = [1, 16];
/// Keys for the random-key runs (`redis-benchmark -r`).
const RANDOM_KEYS: u32 = 100_000;

/// One redis-benchmark workload.
struct Workload {
    label: &'static str,
    /// The `cmdstat_<name>` line its calls are counted on.
    stat: &'static str,
    command: Vec<String>,
    /// `-r`: `__rand_int__` in the command becomes a random key out of this many.
    random_keys: Option<u32>,
    /// Run once before every measurement (puts the bucket in the state the workload needs).
    setup: Option<Vec<String>>,
    /// CL.THROTTLE rows: the `limited` flag (0 allowed, 1 refused) that one call after the
    /// setup must reply, checked once before the runs.
    limited: Option<i64>,
}

/// The workloads; with `cell`, redis-cell's CL.THROTTLE rows follow the THROTTLE.TAKE rows with
/// the same quota. `CL.THROTTLE key max_burst count period` allows max_burst + 1 at once and
/// count per period seconds, so THROTTLE.TAKE's `capacity rate` is `capacity-1 rate 1` (a rate
/// below 1/s: `capacity-1 1 1/rate`).
fn workloads(sha: &str, cell: bool) -> Vec<Workload> {
    let workload = |label, stat, command: String, random_keys, setup: Option<&str>| Workload {
        label,
        stat,
        command: words(&command),
        random_keys,
        setup: setup.map(words),
        limited: None,
    };
    let cell_workload = |label, command: &str, random_keys, setup: Option<&str>, limited| {
        let mut w = workload(label, "cl.throttle", command.into(), random_keys, setup);
        w.limited = Some(limited);
        w
    };
    let mut workloads = vec![
        workload("INCR", "incr", "INCR bench:incr".into(), None, None),
        workload(
            "SET key <int> PX",
            "set",
            format!("SET bench:set {STATE_LIKE_INT} PX 3600000"),
            None,
            None,
        ),
        // 10^6 burst, 10^9/s: every call is granted and writes.
        workload(
            "THROTTLE.TAKE hot key, granted",
            "throttle.take",
            "THROTTLE.TAKE bench:granted 1000000 1000000000".into(),
            None,
            None,
        ),
        // One token per 11.6 days, taken by the setup: every call is denied, nothing written.
        workload(
            "THROTTLE.TAKE hot key, denied",
            "throttle.take",
            "THROTTLE.TAKE bench:denied 1 0.000001".into(),
            None,
            Some("THROTTLE.TAKE bench:denied 1 0.000001"),
        ),
        // Burst 100 at 1/s on each of 100k keys: granted, the keys live while not full.
        workload(
            "THROTTLE.TAKE 100k random keys",
            "throttle.take",
            "THROTTLE.TAKE bench:rand:__rand_int__ 100 1".into(),
            Some(RANDOM_KEYS),
            None,
        ),
        // Burst 1 at 1000/s, reservations up to 10 years: every call reserves (in debt).
        workload(
            "THROTTLE.TAKE MAXWAIT (reserved)",
            "throttle.take",
            "THROTTLE.TAKE bench:reserve 1 1000 MAXWAIT 315360000000".into(),
            None,
            None,
        ),
        workload(
            "EVALSHA script, hot key, granted",
            "evalsha",
            format!("EVALSHA {sha} 1 bench:lua take 1000000 1000000000"),
            None,
            None,
        ),
        workload(
            "EVALSHA script, 100k random keys",
            "evalsha",
            format!("EVALSHA {sha} 1 bench:luarand:__rand_int__ take 100 1"),
            Some(RANDOM_KEYS),
            None,
        ),
    ];
    if cell {
        // Each after its THROTTLE.TAKE counterpart.
        let rows = [
            // Burst 100 at 1/s per key, as the THROTTLE.TAKE random-key row.
            (
                "THROTTLE.TAKE 100k random keys",
                cell_workload(
                    "CL.THROTTLE 100k random keys",
                    "CL.THROTTLE bench:cellrand:__rand_int__ 99 1 1",
                    Some(RANDOM_KEYS),
                    None,
                    0,
                ),
            ),
            // Burst 1 at one per 10^6 s, the token taken by the setup: every call refused.
            (
                "THROTTLE.TAKE hot key, denied",
                cell_workload(
                    "CL.THROTTLE hot key, denied",
                    "CL.THROTTLE bench:celldenied 0 1 1000000",
                    None,
                    Some("CL.THROTTLE bench:celldenied 0 1 1000000"),
                    1,
                ),
            ),
            // Burst 10^6 at 10^9/s: every call allowed and written.
            (
                "THROTTLE.TAKE hot key, granted",
                cell_workload(
                    "CL.THROTTLE hot key, granted",
                    "CL.THROTTLE bench:cellgranted 999999 1000000000 1",
                    None,
                    None,
                    0,
                ),
            ),
        ];
        for (after, row) in rows {
            let at = workloads.iter().position(|w| w.label == after);
            workloads.insert(at.map_or(workloads.len(), |i| i + 1), row);
        }
    }
    workloads
}

/// One measured run.
#[derive(Clone, Copy, Debug)]
struct Run {
    rps: f64,
    p50_ms: f64,
    stat: CommandStat,
    /// SET calls counted while it ran (the module's and the script's writes go through SET).
    nested_sets: u64,
}

pub fn throughput(
    options: &Options,
    server: &Server,
    sha: &str,
    cell: bool,
) -> Result<String, String> {
    let workloads = workloads(sha, cell);
    let mut con = server.conn();
    let port = server.port();
    let seconds = options.seconds;
    for workload in &workloads {
        check_limited(&mut con, workload)?;
    }

    // Calibration (and warm-up: it also creates the random keys): a short run of each
    // workload sizes the measured runs to about `seconds` each.
    let mut requests = BTreeMap::new();
    for (w, workload) in workloads.iter().enumerate() {
        for pipeline in PIPELINES {
            let probe = if options.quick { 5_000 } else { 20_000 } * u64::from(pipeline.min(5));
            let run = measure(&mut con, port, options.clients, pipeline, probe, workload)?;
            let n = ((run.rps * seconds) as u64).clamp(2_000, 50_000_000) / 1000 * 1000;
            requests.insert((w, pipeline), n.max(2_000));
            eprintln!(
                "calibrate  P{pipeline:<2} {:<34} {:>9.0} ops/s -> {n} requests",
                workload.label, run.rps
            );
        }
    }

    // runs[(workload, pipeline)][rep]
    let mut runs: BTreeMap<(usize, u32), Vec<Run>> = BTreeMap::new();
    for rep in 0..options.reps {
        for pipeline in PIPELINES {
            // Interleaved, and the order rotates each repetition, so slow drift of a shared
            // machine spreads over every workload instead of landing on one.
            let count = workloads.len();
            for i in 0..count {
                let w = (i + rep) % count;
                let workload = &workloads[w];
                let n = requests[&(w, pipeline)];
                let run = measure(&mut con, port, options.clients, pipeline, n, workload)?;
                eprintln!(
                    "rep {}/{} P{pipeline:<2} {:<34} {:>9.0} ops/s  {:>6.2} us/call  p50 {:.3} ms",
                    rep + 1,
                    options.reps,
                    workload.label,
                    run.rps,
                    run.stat.usec_per_call,
                    run.p50_ms
                );
                runs.entry((w, pipeline)).or_default().push(run);
            }
        }
    }

    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Throughput: redis-benchmark -c {} -P 1|16, {} repetitions, medians\n",
        options.clients, options.reps
    );
    let _ = writeln!(
        out,
        "ops/s x INCR and us/call x INCR are medians of the per-repetition ratios against INCR \
         in the same repetition. Server us/call is `usec_per_call` of the command's own \
         `cmdstat_` line (THROTTLE.TAKE: `cmdstat_throttle.take`, the script: \
         `cmdstat_evalsha`); it includes the SET the script runs inside (the module writes \
         through the key API: no SET).\n"
    );
    if cell {
        let _ = writeln!(
            out,
            "CL.THROTTLE is redis-cell's, loaded in the same server, with the quota of the \
             THROTTLE.TAKE row above it (`capacity rate` = `capacity-1 rate 1`); its server us/call \
             is `cmdstat_cl.throttle`. It writes through the key API (RM_StringSet, \
             RM_SetExpire), as THROTTLE.TAKE does.\n"
        );
    }
    let _ = writeln!(
        out,
        "| command | P | ops/s | ops/s x INCR | server us/call | us/call x INCR | SET per call | p50 ms |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
    for pipeline in PIPELINES {
        let baseline = &runs[&(0, pipeline)];
        for (w, workload) in workloads.iter().enumerate() {
            let these = &runs[&(w, pipeline)];
            let pick = |f: fn(&Run) -> f64| median(&these.iter().map(f).collect::<Vec<_>>());
            let ratio = |f: fn(&Run) -> f64| {
                median(
                    &these
                        .iter()
                        .zip(baseline)
                        .map(|(run, base)| f(run) / f(base))
                        .collect::<Vec<_>>(),
                )
            };
            let sets = if workload.stat == "set" {
                f64::NAN
            } else {
                pick(|r| r.nested_sets as f64 / r.stat.calls.max(1) as f64)
            };
            let _ = writeln!(
                out,
                "| {} | {pipeline} | {:.0} | {:.2} | {:.2} | {:.1} | {} | {:.3} |",
                workload.label,
                pick(|r| r.rps),
                ratio(|r| r.rps),
                pick(|r| r.stat.usec_per_call),
                ratio(|r| r.stat.usec_per_call),
                if sets.is_nan() {
                    "-".to_owned()
                } else {
                    format!("{sets:.2}")
                },
                pick(|r| r.p50_ms),
            );
        }
    }
    Ok(out)
}

/// For a workload with an expected `limited` flag: the setup, then one call (on key `check` for
/// a random-key workload), whose first reply integer must be that flag.
fn check_limited(con: &mut Connection, workload: &Workload) -> Result<(), String> {
    let Some(limited) = workload.limited else {
        return Ok(());
    };
    if let Some(setup) = &workload.setup {
        redis::cmd(&setup[0])
            .arg(&setup[1..])
            .query::<Value>(con)
            .map_err(|e| format!("setup of {}: {e}", workload.label))?;
    }
    let command: Vec<String> = workload
        .command
        .iter()
        .map(|word| word.replace("__rand_int__", "check"))
        .collect();
    let reply: Vec<i64> = redis::cmd(&command[0])
        .arg(&command[1..])
        .query(con)
        .map_err(|e| format!("{}: {e}", workload.label))?;
    if reply.first() != Some(&limited) {
        return Err(format!(
            "{}: `{}` replied {reply:?}; expected limited = {limited} first",
            workload.label,
            command.join(" ")
        ));
    }
    Ok(())
}

/// CONFIG RESETSTAT, one redis-benchmark run, INFO commandstats.
fn measure(
    con: &mut Connection,
    port: u16,
    clients: u32,
    pipeline: u32,
    requests: u64,
    workload: &Workload,
) -> Result<Run, String> {
    if let Some(setup) = &workload.setup {
        redis::cmd(&setup[0])
            .arg(&setup[1..])
            .query::<Value>(con)
            .map_err(|e| format!("setup of {}: {e}", workload.label))?;
    }
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query::<()>(con)
        .map_err(|e| format!("CONFIG RESETSTAT: {e}"))?;

    let mut command = Command::new("redis-benchmark");
    command.args(["-h", "127.0.0.1", "-p", &port.to_string()]);
    command.args(["-c", &clients.to_string(), "-P", &pipeline.to_string()]);
    command.args(["-n", &requests.to_string(), "--csv"]);
    if let Some(keys) = workload.random_keys {
        command.args(["-r", &keys.to_string()]);
    }
    command.args(&workload.command);
    let output = run_bounded(command, CHILD_TIMEOUT)?;
    let (rps, p50_ms) = parse_benchmark_csv(&output).ok_or_else(|| {
        format!(
            "redis-benchmark printed no result for {}:\n{output}",
            workload.label
        )
    })?;

    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(con)
        .map_err(|e| format!("INFO commandstats: {e}"))?;
    let stats = parse_commandstats(&info);
    let stat = stats.get(workload.stat).copied().unwrap_or_default();
    if stat.calls < requests || stat.failed_calls > 0 {
        return Err(format!(
            "{}: the server counted {} calls ({} failed) for {requests} requests: {info}",
            workload.label, stat.calls, stat.failed_calls
        ));
    }
    let nested_sets = stats.get("set").map_or(0, |s| s.calls);
    Ok(Run {
        rps,
        p50_ms,
        stat,
        nested_sets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_name_their_stats() {
        for cell in [false, true] {
            let workloads = workloads("0123", cell);
            assert_eq!(workloads[0].stat, "incr", "INCR is the baseline, first");
            assert!(workloads
                .iter()
                .all(|w| w.command[0].to_ascii_lowercase() == w.stat));
            assert!(workloads
                .iter()
                .filter(|w| w.random_keys.is_some())
                .all(|w| w.command.iter().any(|a| a.contains("__rand_int__"))));
        }
    }

    /// Without --redis-cell the rows are exactly the THROTTLE.TAKE ones; with it each
    /// CL.THROTTLE row follows the THROTTLE.TAKE row with the same quota.
    #[test]
    fn cell_rows_follow_their_counterpart() {
        let plain = workloads("0123", false);
        assert!(plain.iter().all(|w| w.stat != "cl.throttle"));
        let cell = workloads("0123", true);
        assert_eq!(cell.len(), plain.len() + 3);
        let others: Vec<_> = cell
            .iter()
            .filter(|w| w.stat != "cl.throttle")
            .map(|w| w.label)
            .collect();
        assert_eq!(others, plain.iter().map(|w| w.label).collect::<Vec<_>>());
        for (i, w) in cell
            .iter()
            .enumerate()
            .filter(|(_, w)| w.stat == "cl.throttle")
        {
            let take = &cell[i - 1];
            assert_eq!(
                take.stat, "throttle.take",
                "{} follows {}",
                w.label, take.label
            );
            assert_eq!(w.random_keys, take.random_keys);
            assert_eq!(w.setup.is_some(), take.setup.is_some());
            // THROTTLE.TAKE key capacity rate  <->  CL.THROTTLE key capacity-1 count period.
            let capacity: f64 = take.command[2].parse().unwrap();
            let rate: f64 = take.command[3].parse().unwrap();
            let n = |k: usize| w.command[k].parse::<f64>().unwrap();
            assert_eq!(n(2) + 1.0, capacity, "{}", w.label);
            assert!((n(3) / n(4) / rate - 1.0).abs() < 1e-9, "{}", w.label);
            assert_eq!(w.limited, Some(i64::from(take.setup.is_some())));
        }
    }
}

//! Throughput: redis-benchmark runs of every workload, interleaved, at pipelining 1 and 16;
//! medians, ratios against INCR (and, for the bucket rows, against the hand-written script) in
//! the same repetition, server time from INFO commandstats. With `--redis-cell`, redis-cell's
//! CL.THROTTLE under the same quotas joins the rotation; with `--baseline-module`, THROTTLE.TAKE's
//! hot-key and random-key rows also run as pairs, on two more servers started alike, one with
//! this module and one with the baseline build, right after the row they repeat, and the report
//! gives the ratio new/baseline. (Not against the first server: it also holds the other rows'
//! random keys, 4 x 100k, which slows its random-key lookups.)

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use redis::{Connection, Value};
use throttle_benches::{
    info, median, parse_benchmark_csv, parse_commandstats, reset_stats, CommandStat, Scripts,
};
use throttle_testkit::Server;

use crate::child::run_bounded;
use crate::{words, Options, Target, CHILD_TIMEOUT, STATE_LIKE_INT};

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
    /// The first integer that one call after the setup must reply, checked once before the
    /// runs: the `limited` flag of CL.THROTTLE (0 allowed, 1 refused), the `allowed` or
    /// `granted` flag of the scripts and the library (1).
    expect_first: Option<i64>,
    /// The server it runs on.
    target: Target,
    /// The hand-written script's row with the same quota and keys, which this row is also
    /// given as a ratio against.
    versus_hand: Option<&'static str>,
    /// For a row on the baseline module: the row on the paired server it is compared with.
    counterpart: Option<&'static str>,
}

const HAND_HOT: &str = "hand-written script, hot key, granted";
const HAND_RANDOM: &str = "hand-written script, 100k random keys";
const TAKE_GRANTED: &str = "THROTTLE.TAKE hot key, granted";
const TAKE_DENIED: &str = "THROTTLE.TAKE hot key, denied";
const TAKE_RANDOM: &str = "THROTTLE.TAKE 100k random keys";

/// The workloads; with `cell`, redis-cell's CL.THROTTLE rows follow the THROTTLE.TAKE rows with
/// the same quota, and with `baseline`, the THROTTLE.TAKE rows on the baseline module follow
/// theirs. `CL.THROTTLE key max_burst count period` allows max_burst + 1 at once and count per
/// period seconds, so THROTTLE.TAKE's `capacity rate` is `capacity-1 rate 1` (a rate below 1/s:
/// `capacity-1 1 1/rate`).
fn workloads(scripts: &Scripts, cell: bool, baseline: bool) -> Vec<Workload> {
    let workload = |label, stat, command: String, random_keys, setup: Option<&str>| Workload {
        label,
        stat,
        command: words(&command),
        random_keys,
        setup: setup.map(words),
        expect_first: None,
        target: Target::Main,
        versus_hand: None,
        counterpart: None,
    };
    // A bucket row that is also given against the hand-written script's row `hand`.
    let versus = |hand, mut w: Workload| {
        w.versus_hand = Some(hand);
        w
    };
    // A granted Lua row: its first reply integer is 1.
    let granted = |mut w: Workload| {
        w.expect_first = Some(1);
        w
    };
    let cell_workload = |label, command: &str, random_keys, setup: Option<&str>, limited| {
        let mut w = workload(label, "cl.throttle", command.into(), random_keys, setup);
        w.expect_first = Some(limited);
        w
    };
    let Scripts { twin, hand } = scripts;
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
        versus(
            HAND_HOT,
            workload(
                TAKE_GRANTED,
                "throttle.take",
                "THROTTLE.TAKE bench:granted 1000000 1000000000".into(),
                None,
                None,
            ),
        ),
        // One token per 11.6 days, taken by the setup: every call is denied, nothing written.
        workload(
            TAKE_DENIED,
            "throttle.take",
            "THROTTLE.TAKE bench:denied 1 0.000001".into(),
            None,
            Some("THROTTLE.TAKE bench:denied 1 0.000001"),
        ),
        // Burst 100 at 1/s on each of 100k keys: granted, the keys live while not full.
        versus(
            HAND_RANDOM,
            workload(
                TAKE_RANDOM,
                "throttle.take",
                "THROTTLE.TAKE bench:rand:__rand_int__ 100 1".into(),
                Some(RANDOM_KEYS),
                None,
            ),
        ),
        // Burst 1 at 1000/s, reservations up to 10 years: every call reserves (in debt).
        workload(
            "THROTTLE.TAKE MAXWAIT (reserved)",
            "throttle.take",
            "THROTTLE.TAKE bench:reserve 1 1000 MAXWAIT 315360000000".into(),
            None,
            None,
        ),
        // The floor of any library call: a function that only returns a number.
        workload(
            "FCALL_RO throttle_version (an empty function)",
            "fcall_ro",
            "FCALL_RO throttle_version 0".into(),
            None,
            None,
        ),
        // The quotas of THROTTLE.TAKE's granted rows: the hand-written bucket, the function
        // library bare and with the words the client sends, and the script twin.
        granted(workload(
            HAND_HOT,
            "evalsha",
            format!("EVALSHA {hand} 1 bench:hand 1000000 1000000000 1"),
            None,
            None,
        )),
        granted(versus(
            HAND_HOT,
            workload(
                "FCALL library, hot key, granted",
                "fcall",
                "FCALL throttle_take 1 bench:lib 1000000 1000000000".into(),
                None,
                None,
            ),
        )),
        granted(versus(
            HAND_HOT,
            workload(
                "FCALL library, client's words",
                "fcall",
                "FCALL throttle_take 1 bench:libc 1000000 1000000000 MAXWAIT 315360000000 TICKET"
                    .into(),
                None,
                None,
            ),
        )),
        granted(versus(
            HAND_HOT,
            workload(
                "EVALSHA script, hot key, granted",
                "evalsha",
                format!("EVALSHA {twin} 1 bench:lua take 1000000 1000000000"),
                None,
                None,
            ),
        )),
        granted(workload(
            HAND_RANDOM,
            "evalsha",
            format!("EVALSHA {hand} 1 bench:handrand:__rand_int__ 100 1 1"),
            Some(RANDOM_KEYS),
            None,
        )),
        granted(versus(
            HAND_RANDOM,
            workload(
                "FCALL library, 100k random keys",
                "fcall",
                "FCALL throttle_take 1 bench:librand:__rand_int__ 100 1".into(),
                Some(RANDOM_KEYS),
                None,
            ),
        )),
        granted(versus(
            HAND_RANDOM,
            workload(
                "EVALSHA script, 100k random keys",
                "evalsha",
                format!("EVALSHA {twin} 1 bench:luarand:__rand_int__ take 100 1"),
                Some(RANDOM_KEYS),
                None,
            ),
        )),
    ];
    // (the row it follows, the row)
    let mut rows = Vec::new();
    if cell {
        rows.extend([
            // Burst 100 at 1/s per key, as the THROTTLE.TAKE random-key row.
            (
                TAKE_RANDOM,
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
                TAKE_DENIED,
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
                TAKE_GRANTED,
                cell_workload(
                    "CL.THROTTLE hot key, granted",
                    "CL.THROTTLE bench:cellgranted 999999 1000000000 1",
                    None,
                    None,
                    0,
                ),
            ),
        ]);
    }
    if baseline {
        // The same commands on the paired server (this module) and on the baseline server,
        // right after the row they repeat (before a CL.THROTTLE row), so the two runs of a pair
        // are next to each other in time.
        let labels = [
            (
                TAKE_GRANTED,
                "THROTTLE.TAKE hot key, granted (pair: this module)",
                "THROTTLE.TAKE hot key, granted (pair: baseline module)",
            ),
            (
                TAKE_DENIED,
                "THROTTLE.TAKE hot key, denied (pair: this module)",
                "THROTTLE.TAKE hot key, denied (pair: baseline module)",
            ),
            (
                TAKE_RANDOM,
                "THROTTLE.TAKE 100k random keys (pair: this module)",
                "THROTTLE.TAKE 100k random keys (pair: baseline module)",
            ),
        ];
        let mut paired = Vec::new();
        for (of, new_label, old_label) in labels {
            let main = workloads
                .iter()
                .find(|w| w.label == of)
                .expect("a TAKE row");
            let copy = |label, target, counterpart| Workload {
                label,
                stat: main.stat,
                command: main.command.clone(),
                random_keys: main.random_keys,
                setup: main.setup.clone(),
                expect_first: main.expect_first,
                target,
                versus_hand: None,
                counterpart,
            };
            rows.push((of, copy(old_label, Target::Baseline, Some(new_label))));
            paired.push((of, copy(new_label, Target::Paired, None)));
        }
        rows.extend(paired);
    }
    // Each right after the row it follows: the later inserted is the nearer (so a row, its
    // pair on this module, its pair on the baseline, then CL.THROTTLE's).
    for (after, row) in rows {
        let at = workloads.iter().position(|w| w.label == after);
        workloads.insert(at.map_or(workloads.len(), |i| i + 1), row);
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

/// A server the workloads run on: a connection for setup and stats, and its port.
struct Endpoint {
    con: Connection,
    port: u16,
}

pub fn throughput(
    options: &Options,
    server: &Server,
    pair: Option<(&Server, &Server)>,
    scripts: &Scripts,
    cell: bool,
) -> Result<String, String> {
    let baseline = pair.map(|(_, baseline)| baseline);
    let workloads = workloads(scripts, cell, pair.is_some());
    let endpoint = |server: &Server| Endpoint {
        con: server.conn(),
        port: server.port(),
    };
    // Indexed by Target: Main, Baseline, Paired.
    let mut endpoints = vec![endpoint(server)];
    if let Some((paired, baseline)) = pair {
        endpoints.push(endpoint(baseline));
        endpoints.push(endpoint(paired));
    }
    let seconds = options.seconds;
    for workload in &workloads {
        check_first(&mut endpoints[workload.target as usize].con, workload)?;
    }

    // Calibration (and warm-up: it also creates the random keys): a short run of each
    // workload sizes the measured runs to about `seconds` each.
    let mut requests = BTreeMap::new();
    for (w, workload) in workloads.iter().enumerate() {
        for pipeline in PIPELINES {
            let probe = if options.quick { 5_000 } else { 20_000 } * u64::from(pipeline.min(5));
            let at = &mut endpoints[workload.target as usize];
            let run = measure(at, options.clients, pipeline, probe, workload)?;
            let n = ((run.rps * seconds) as u64).clamp(2_000, 50_000_000) / 1000 * 1000;
            requests.insert((w, pipeline), n.max(2_000));
            eprintln!(
                "calibrate  P{pipeline:<2} {:<48} {:>9.0} ops/s -> {n} requests",
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
                let at = &mut endpoints[workload.target as usize];
                let run = measure(at, options.clients, pipeline, n, workload)?;
                eprintln!(
                    "rep {}/{} P{pipeline:<2} {:<48} {:>9.0} ops/s  {:>6.2} us/call  p50 {:.3} ms",
                    rep + 1,
                    options.reps,
                    workload.label,
                    run.rps,
                    run.us_per_call(),
                    run.p50_ms
                );
                runs.entry((w, pipeline)).or_default().push(run);
            }
        }
    }
    let index = |label: &str| workloads.iter().position(|w| w.label == label);

    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Throughput: redis-benchmark -c {} -P 1|16, {} repetitions, medians\n",
        options.clients, options.reps
    );
    let _ = writeln!(
        out,
        "ops/s x INCR and us/call x INCR are medians of the per-repetition ratios against INCR \
         in the same repetition; x hand, against the hand-written script's row with the same \
         quota and keys (`benches/lua/hand_written_bucket.lua`: HMGET, HSET, PEXPIRE of a hash). \
         Server us/call is `usec / calls` of the command's own `cmdstat_` line \
         (THROTTLE.TAKE: `cmdstat_throttle.take`, the scripts: `cmdstat_evalsha`, the library: \
         `cmdstat_fcall`); for the scripts and the library it includes the commands they run \
         inside (TIME, GET, SET; TIME, HMGET, HSET, PEXPIRE), while the module writes through \
         the key API (no SET). The library's rows call `throttle_take` bare and with the words \
         the client sends (`MAXWAIT 315360000000 TICKET`); `FCALL_RO throttle_version 0`, \
         a function that only returns a number, is the floor of any library call. The machine \
         may be shared and noisy: compare the ratios, measured in the same repetition, not \
         the absolute figures across runs.\n"
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
    if baseline.is_some() {
        let _ = writeln!(
            out,
            "(pair: ...) rows repeat the row above them on two more servers of the same flavor, \
             started alike, one loading this module and one the baseline build, which hold \
             only the pairs' keys; their ratios x INCR are against INCR on the first server.\n"
        );
    }
    let _ = writeln!(
        out,
        "| command | P | ops/s | ops/s x INCR | ops/s x hand | server us/call | us/call x INCR \
         | us/call x hand | SET per call | p50 ms |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let shown = |ratio: f64| {
        if ratio.is_nan() {
            "-".to_owned()
        } else {
            format!("{ratio:.2}")
        }
    };
    for pipeline in PIPELINES {
        let incr = &runs[&(0, pipeline)];
        for (w, workload) in workloads.iter().enumerate() {
            let these = &runs[&(w, pipeline)];
            let pick = |f: fn(&Run) -> f64| median(&these.iter().map(f).collect::<Vec<_>>());
            let hand = workload
                .versus_hand
                .and_then(index)
                .map(|h| &runs[&(h, pipeline)][..]);
            let against_hand = |f: fn(&Run) -> f64| hand.map_or(f64::NAN, |h| ratio(these, h, f));
            let sets = if workload.stat == "set" {
                f64::NAN
            } else {
                pick(|r| r.nested_sets as f64 / r.stat.calls.max(1) as f64)
            };
            let _ = writeln!(
                out,
                "| {} | {pipeline} | {:.0} | {:.2} | {} | {:.2} | {:.1} | {} | {} | {:.3} |",
                workload.label,
                pick(|r| r.rps),
                ratio(these, incr, |r| r.rps),
                shown(against_hand(|r| r.rps)),
                pick(Run::us_per_call),
                ratio(these, incr, Run::us_per_call),
                shown(against_hand(Run::us_per_call)),
                shown(sets),
                pick(|r| r.p50_ms),
            );
        }
    }

    if let Some(baseline) = baseline {
        let _ = writeln!(
            out,
            "\n### THROTTLE.TAKE: this module against the baseline module\n\n\
             This module: {}; baseline: {}, each on its own server (the baseline's: {}), \
             started alike and holding only the pairs' keys. Ratios new/baseline are medians \
             of the per-repetition ratios of each pair, measured one right after the other.\n",
            throttle_testkit::module_path().display(),
            options
                .baseline_module
                .as_deref()
                .unwrap_or(Path::new("?"))
                .display(),
            baseline.url(),
        );
        let _ = writeln!(
            out,
            "| command | P | ops/s | ops/s baseline | ops/s new/baseline | us/call | \
             us/call baseline | us/call new/baseline |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|");
        for pipeline in PIPELINES {
            for (b, workload) in workloads.iter().enumerate() {
                let Some(new) = workload.counterpart.and_then(index) else {
                    continue;
                };
                let (new_runs, old_runs) = (&runs[&(new, pipeline)], &runs[&(b, pipeline)]);
                let pick = |runs: &[Run], f: fn(&Run) -> f64| {
                    median(&runs.iter().map(f).collect::<Vec<_>>())
                };
                let _ = writeln!(
                    out,
                    "| {} | {pipeline} | {:.0} | {:.0} | {:.3} | {:.3} | {:.3} | {:.3} |",
                    workloads[new]
                        .label
                        .trim_end_matches(" (pair: this module)"),
                    pick(new_runs, |r| r.rps),
                    pick(old_runs, |r| r.rps),
                    ratio(new_runs, old_runs, |r| r.rps),
                    pick(new_runs, Run::us_per_call),
                    pick(old_runs, Run::us_per_call),
                    ratio(new_runs, old_runs, Run::us_per_call),
                );
            }
        }
    }
    Ok(out)
}

/// The median of the per-repetition ratios `f(these[rep]) / f(those[rep])`.
fn ratio(these: &[Run], those: &[Run], f: fn(&Run) -> f64) -> f64 {
    median(
        &these
            .iter()
            .zip(those)
            .map(|(a, b)| f(a) / f(b))
            .collect::<Vec<_>>(),
    )
}

/// For a workload with an expected first reply integer: the setup, then one call (on key
/// `check` for a random-key workload), whose first reply integer must be that.
fn check_first(con: &mut Connection, workload: &Workload) -> Result<(), String> {
    let Some(first) = workload.expect_first else {
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
    let reply: Vec<Value> = redis::cmd(&command[0])
        .arg(&command[1..])
        .query(con)
        .map_err(|e| format!("{}: {e}", workload.label))?;
    if reply.first() != Some(&Value::Int(first)) {
        return Err(format!(
            "{}: `{}` replied {reply:?}; expected {first} first",
            workload.label,
            command.join(" ")
        ));
    }
    Ok(())
}

impl Run {
    /// Server µs per call: `usec / calls`, with more digits than `usec_per_call` has.
    fn us_per_call(&self) -> f64 {
        self.stat.usec as f64 / self.stat.calls.max(1) as f64
    }
}

/// CONFIG RESETSTAT, one redis-benchmark run, INFO commandstats.
fn measure(
    at: &mut Endpoint,
    clients: u32,
    pipeline: u32,
    requests: u64,
    workload: &Workload,
) -> Result<Run, String> {
    let (con, port) = (&mut at.con, at.port);
    if let Some(setup) = &workload.setup {
        redis::cmd(&setup[0])
            .arg(&setup[1..])
            .query::<Value>(con)
            .map_err(|e| format!("setup of {}: {e}", workload.label))?;
    }
    reset_stats(con)?;

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

    // The whole section goes into the error below: what else the server counted.
    let info = info(con, "commandstats")?;
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

    fn scripts() -> Scripts {
        Scripts {
            twin: "0123".into(),
            hand: "4567".into(),
        }
    }

    #[test]
    fn workloads_name_their_stats() {
        for (cell, baseline) in [(false, false), (true, false), (false, true), (true, true)] {
            let workloads = workloads(&scripts(), cell, baseline);
            assert_eq!(workloads[0].stat, "incr", "INCR is the baseline, first");
            assert!(workloads
                .iter()
                .all(|w| w.command[0].to_ascii_lowercase() == w.stat));
            assert!(workloads
                .iter()
                .filter(|w| w.random_keys.is_some())
                .all(|w| w.command.iter().any(|a| a.contains("__rand_int__"))));
            let mut labels: Vec<_> = workloads.iter().map(|w| w.label).collect();
            labels.sort_unstable();
            labels.dedup();
            assert_eq!(labels.len(), workloads.len(), "labels are unique");
        }
    }

    /// Every ratio against the hand-written script is against a hand-written row with the same
    /// quota and the same kind of keys.
    #[test]
    fn hand_written_rows_match_theirs() {
        let workloads = workloads(&scripts(), true, true);
        let mut compared = 0;
        for w in workloads.iter().filter(|w| w.versus_hand.is_some()) {
            let hand = workloads
                .iter()
                .find(|h| Some(h.label) == w.versus_hand)
                .unwrap();
            assert_eq!(hand.command[..2], ["EVALSHA", "4567"], "{}", hand.label);
            assert_eq!(hand.random_keys, w.random_keys, "{}", w.label);
            // The quota: `capacity rate` after the key (and the script's `take`).
            let quota = |w: &Workload| {
                let after_key = w
                    .command
                    .iter()
                    .position(|a| a.starts_with("bench:"))
                    .unwrap();
                let skip = usize::from(w.command[after_key + 1] == "take");
                w.command[after_key + 1 + skip..after_key + 3 + skip].to_vec()
            };
            assert_eq!(quota(hand), quota(w), "{}", w.label);
            compared += 1;
        }
        // THROTTLE.TAKE, the library (2) and the script on the hot key; three on random keys.
        assert_eq!(compared, 7);
        assert!(workloads.iter().any(|w| w.stat == "fcall_ro"), "the floor");
        let fcalls: Vec<_> = workloads.iter().filter(|w| w.stat == "fcall").collect();
        assert_eq!(fcalls.len(), 3);
        assert!(fcalls.iter().all(|w| w.expect_first == Some(1)));
        assert!(fcalls
            .iter()
            .any(|w| w.command.ends_with(&words("MAXWAIT 315360000000 TICKET"))));
    }

    /// Each pair repeats a row's command, on the paired server then on the baseline server,
    /// right after it.
    #[test]
    fn baseline_rows_follow_their_counterpart() {
        let plain = workloads(&scripts(), false, false);
        assert!(plain.iter().all(|w| w.target == Target::Main));
        for cell in [false, true] {
            let rows = workloads(&scripts(), cell, true);
            assert_eq!(rows.len(), plain.len() + 6 + if cell { 3 } else { 0 });
            let base: Vec<_> = rows
                .iter()
                .enumerate()
                .filter(|(_, w)| w.target == Target::Baseline)
                .collect();
            assert_eq!(base.len(), 3);
            for (i, w) in base {
                let (main, new) = (&rows[i - 2], &rows[i - 1]);
                assert_eq!(Some(new.label), w.counterpart);
                assert_eq!((main.target, new.target), (Target::Main, Target::Paired));
                assert_eq!(new.counterpart, None);
                for row in [main, new] {
                    assert_eq!(
                        (&row.command, &row.setup, row.random_keys),
                        (&w.command, &w.setup, w.random_keys)
                    );
                }
            }
        }
    }

    /// Without --redis-cell the rows are exactly the THROTTLE.TAKE ones; with it each
    /// CL.THROTTLE row follows the THROTTLE.TAKE row with the same quota.
    #[test]
    fn cell_rows_follow_their_counterpart() {
        let plain = workloads(&scripts(), false, false);
        assert!(plain.iter().all(|w| w.stat != "cl.throttle"));
        let cell = workloads(&scripts(), true, false);
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
            assert_eq!(w.expect_first, Some(i64::from(take.setup.is_some())));
        }
    }
}

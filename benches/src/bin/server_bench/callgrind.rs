//! Callgrind: instructions per call inside `processCommand`, and where they go, for each
//! command, each on its own server under `valgrind --tool=callgrind`. Instruction counts do not
//! depend on the load of a shared machine. INCR, THROTTLE.TAKE, the hand-written script, the
//! function library and the script twin side by side; with `--baseline-module`, THROTTLE.TAKE's
//! profiles also on a server with the baseline module.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use redis::Value;
use throttle_benches::{load_scripts, parse_commandstats};
use throttle_testkit::info_field;
use throttle_testkit::Server;

use crate::child::run_bounded;
use crate::{baseline_builder, require, words, Options, CHILD_TIMEOUT, STATE_LIKE_INT};

/// One profiled workload: `calls` calls of `command`, one client, pipelined by 16. `{sha}` and
/// `{hand}` in the command are the script twin's and the hand-written script's SHA1s.
struct Profile {
    name: &'static str,
    label: &'static str,
    command: String,
    random_keys: Option<u32>,
    setup: Option<&'static str>,
    calls: u64,
    /// The same calls run once before the counters are zeroed (the random keys exist then).
    warm: bool,
    /// On the baseline module's server; `label` is then the label of this module's profile.
    baseline: bool,
}

/// The label of the hand-written script's profile, which the others are also given against.
const HAND: &str = "hand-written script, hot key, granted";

/// The profiles; with `baseline`, THROTTLE.TAKE's hot-key and random-key profiles also on the
/// baseline module, each right after its own.
fn profiles(quick: bool, baseline: bool) -> Vec<Profile> {
    let scale = if quick { 1 } else { 4 };
    let profile = |name, label, command: &str, random_keys, setup, calls: u64| Profile {
        name,
        label,
        command: command.to_owned(),
        random_keys,
        setup,
        calls: calls * scale,
        warm: false,
        baseline: false,
    };
    let mut profiles = vec![
        profile("incr", "INCR", "INCR bench:incr", None, None, 5_000),
        profile(
            "set",
            "SET key <int> PX",
            &format!("SET bench:set {STATE_LIKE_INT} PX 3600000"),
            None,
            None,
            5_000,
        ),
        profile(
            "take-granted",
            "THROTTLE.TAKE hot key, granted",
            "THROTTLE.TAKE bench:granted 1000000 1000000000",
            None,
            None,
            5_000,
        ),
        profile(
            "take-denied",
            "THROTTLE.TAKE hot key, denied",
            "THROTTLE.TAKE bench:denied 1 0.000001",
            None,
            Some("THROTTLE.TAKE bench:denied 1 0.000001"),
            5_000,
        ),
        // Burst 100 at 1/s on 1000 keys that exist (the warm-up run made them): granted.
        Profile {
            warm: true,
            ..profile(
                "take-random",
                "THROTTLE.TAKE 1000 random keys (warm)",
                "THROTTLE.TAKE bench:rand:__rand_int__ 100 1",
                Some(1000),
                None,
                5_000,
            )
        },
        profile(
            "take-reserved",
            "THROTTLE.TAKE MAXWAIT (reserved)",
            "THROTTLE.TAKE bench:reserve 1 1000 MAXWAIT 315360000000",
            None,
            None,
            5_000,
        ),
        profile(
            "hand",
            HAND,
            "EVALSHA {hand} 1 bench:hand 1000000 1000000000 1",
            None,
            None,
            1_000,
        ),
        profile(
            "fcall",
            "FCALL library, hot key, granted",
            "FCALL throttle_take 1 bench:lib 1000000 1000000000",
            None,
            None,
            1_000,
        ),
        profile(
            "fcall-client",
            "FCALL library, client's words",
            "FCALL throttle_take 1 bench:libc 1000000 1000000000 MAXWAIT 315360000000 TICKET",
            None,
            None,
            1_000,
        ),
        profile(
            "evalsha",
            "EVALSHA script, hot key, granted",
            "EVALSHA {sha} 1 bench:lua take 1000000 1000000000",
            None,
            None,
            1_000,
        ),
    ];
    if baseline {
        let names = [
            ("take-granted", "baseline-take-granted"),
            ("take-denied", "baseline-take-denied"),
            ("take-random", "baseline-take-random"),
        ];
        for (of, name) in names {
            let at = profiles
                .iter()
                .position(|p| p.name == of)
                .expect("a TAKE profile");
            let new = &profiles[at];
            let row = Profile {
                name,
                label: new.label,
                command: new.command.clone(),
                random_keys: new.random_keys,
                setup: new.setup,
                calls: new.calls,
                warm: new.warm,
                baseline: true,
            };
            profiles.insert(at + 1, row);
        }
    }
    profiles
}

/// Functions shown in the breakdown, when they appear in a profile: (callgrind name, meaning).
const BREAKDOWN: &[(&str, &str)] = &[
    (
        "server.c:call ",
        "call(): the command, as commandstats times it",
    ),
    ("incrCommand ", "INCR's own work"),
    (
        "setGenericCommand ",
        "SET's own work (also the SET inside the script)",
    ),
    (
        "RedisModuleCommandDispatcher ",
        "module command: context set-up, THROTTLE.TAKE, teardown",
    ),
    (
        "redis_throttle_module::take::command ",
        "THROTTLE.TAKE's handler",
    ),
    (
        "RM_Call ",
        "every RM_Call as a whole (THROTTLE.PEEK's GET; none in THROTTLE.TAKE)",
    ),
    (
        "server.c:call'2 ",
        "the commands run inside (TIME, GET, SET; hand-written: TIME, HMGET, HSET, PEXPIRE)",
    ),
    (
        "moduleCreateArgvFromUserFormat ",
        "RM_Replicate: build SET's argv from the format (the state and PXAT)",
    ),
    (
        "getCommand ",
        "GET's own work (the script's and the library's read)",
    ),
    (
        "lookupCommandLogic ",
        "command table lookups (the client's command, and RM_Replicate's SET)",
    ),
    ("moduleReleaseTempClient ", "RM_Call: reset the fake client"),
    ("RM_FreeCallReply ", "RM_Call: free the reply"),
    (
        "callReplyCreate",
        "RM_Call: wrap the reply the SET wrote into the fake client",
    ),
    (
        "RM_Replicate ",
        "RM_Replicate: SET key <state> PXAT <ms> for replicas and the AOF",
    ),
    ("RM_OpenKey ", "RM_OpenKey"),
    (
        "RM_StringDMA ",
        "RM_StringDMA (read the state, then write it)",
    ),
    ("RM_SetAbsExpire ", "RM_SetAbsExpire: the key's TTL"),
    (
        "dbUnshareStringValue",
        "in DMA or StringTruncate: copy a value that is not raw into a raw string",
    ),
    ("RM_ReplyWithLongLong ", "RM_ReplyWithLongLong (x4)"),
    (
        "TakeArgs::parse ",
        "TakeArgs::parse (in throttle_bucket::take, or ::args in earlier builds)",
    ),
    ("interval::parse_rate ", "parse_rate: the rate argument"),
    (
        "Interval::from_rate ",
        "Interval::from_rate: the rate argument (earlier builds)",
    ),
    ("throttle_bucket::take::take ", "take (the arithmetic)"),
    (
        "throttle_bucket::state::parse_state",
        "parse_state (the stored 8 bytes)",
    ),
    ("evalShaCommand ", "EVALSHA as a whole"),
    ("fcallCommand ", "FCALL as a whole"),
    (
        "hmgetCommand ",
        "HMGET's own work (the hand-written script's read)",
    ),
    (
        "hsetCommand ",
        "HSET's own work (the hand-written script's write)",
    ),
    (
        "pexpireCommand ",
        "PEXPIRE's own work (the hand-written script's TTL)",
    ),
    ("luaCallFunction ", "running the script's function"),
    (
        "luaRedisGenericCommand ",
        "redis.call/pcall (the commands above) incl. argument and reply conversion",
    ),
    ("luaV_execute ", "the Lua VM (includes the redis.call time)"),
    ("luaB_tonumber ", "tonumber(): strtod"),
    ("str_format ", "string.format"),
    ("str_find_aux ", "string.find/match"),
    ("luaC_step ", "Lua garbage collector"),
];

pub fn callgrind(options: &Options, out: &Path, baseline: Option<&Path>) -> Result<String, String> {
    require("callgrind_annotate", "apt-get install valgrind")?;
    let profiles = profiles(options.quick, baseline.is_some());
    let mut results = Vec::new();
    for profile in &profiles {
        let module = if profile.baseline { baseline } else { None };
        results.push(profile_one(options, out, profile, module)?);
    }
    let per_call = |label: &str| {
        profiles
            .iter()
            .zip(&results)
            .find(|(p, _)| p.label == label && !p.baseline)
            .map_or(f64::NAN, |(_, r)| r.1)
    };
    let incr = results[0].1;
    let hand = per_call(HAND);
    let mut text = String::new();
    let _ = writeln!(
        text,
        "\n## Callgrind: instructions per call (Ir inside processCommand, one client, -P 16)\n"
    );
    let _ = writeln!(text, "| command | Ir/call | x INCR | x hand-written |");
    let _ = writeln!(text, "|---|---:|---:|---:|");
    for ((label, per_call, _), profile) in results.iter().zip(&profiles) {
        if profile.baseline {
            continue;
        }
        let _ = writeln!(
            text,
            "| {label} | {per_call:.0} | {:.1} | {:.2} |",
            per_call / incr,
            per_call / hand
        );
    }
    if let Some(path) = baseline {
        let _ = writeln!(
            text,
            "\nTHROTTLE.TAKE against the baseline module ({}):\n",
            path.display()
        );
        let _ = writeln!(
            text,
            "| command | Ir/call | Ir/call baseline | new/baseline |"
        );
        let _ = writeln!(text, "|---|---:|---:|---:|");
        for (i, profile) in profiles.iter().enumerate().skip(1) {
            if profile.baseline {
                let (new, old) = (results[i - 1].1, results[i].1);
                let _ = writeln!(
                    text,
                    "| {} | {new:.0} | {old:.0} | {:.3} |",
                    profile.label,
                    new / old
                );
            }
        }
    }
    for ((label, _, breakdown), profile) in results.iter().zip(&profiles) {
        if breakdown.is_empty() {
            continue;
        }
        let suffix = if profile.baseline {
            " (baseline module)"
        } else {
            ""
        };
        let _ = writeln!(text, "\n{label}{suffix}: inclusive Ir per call\n");
        let _ = writeln!(text, "| function | Ir/call | what it is |");
        let _ = writeln!(text, "|---|---:|---|");
        for (name, per_call, meaning) in breakdown {
            let _ = writeln!(text, "| `{}` | {per_call:.0} | {meaning} |", name.trim());
        }
    }
    let _ = writeln!(
        text,
        "\n(full profiles: callgrind_annotate --inclusive=yes {}/callgrind.<name>.out.1)",
        out.display()
    );
    Ok(text)
}

/// Starts a server under callgrind, zeroes the counters once it is ready, runs the calls,
/// dumps, and reads the totals. Returns (label, Ir per call, breakdown). With `module`, the
/// server loads that module (the baseline) instead of ours.
#[allow(clippy::type_complexity)]
fn profile_one(
    options: &Options,
    out: &Path,
    profile: &Profile,
    module: Option<&Path>,
) -> Result<(String, f64, Vec<(String, f64, &'static str)>), String> {
    let file = out.join(format!("callgrind.{}.out", profile.name));
    let dump = PathBuf::from(format!("{}.1", file.display()));
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&dump);
    let out_arg = format!("--callgrind-out-file={}", file.display());
    let builder = match module {
        Some(path) => baseline_builder(options.flavor, path),
        None => Server::builder(options.flavor),
    };
    let mut server = builder
        .wrapper(
            "valgrind",
            &[
                "--tool=callgrind",
                "--toggle-collect=processCommand",
                &out_arg,
            ],
        )
        .start();
    let mut con = server.conn();
    let scripts = load_scripts(&mut con)?;
    if let Some(setup) = profile.setup {
        let args = words(setup);
        redis::cmd(&args[0])
            .arg(&args[1..])
            .query::<Value>(&mut con)
            .map_err(|e| format!("setup: {e}"))?;
    }
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query(&mut con)
        .map_err(|e| e.to_string())?;
    let pid = info_field(&info, "process_id")
        .ok_or("no process_id")?
        .to_owned();
    let control = |what: &str| -> Result<String, String> {
        let mut command = Command::new("callgrind_control");
        command.args([what, &pid]);
        run_bounded(command, Duration::from_secs(60))
    };
    let benchmark = || {
        let mut command = Command::new("redis-benchmark");
        command.args(["-h", "127.0.0.1", "-p", &server.port().to_string()]);
        command.args([
            "-c",
            "1",
            "-P",
            "16",
            "-n",
            &profile.calls.to_string(),
            "--csv",
        ]);
        if let Some(keys) = profile.random_keys {
            command.args(["-r", &keys.to_string()]);
        }
        let line = profile
            .command
            .replace("{sha}", &scripts.twin)
            .replace("{hand}", &scripts.hand);
        command.args(words(&line));
        run_bounded(command, CHILD_TIMEOUT)
    };
    if profile.warm {
        benchmark()?;
    }
    control("-z")?;
    benchmark()?;
    control("-d")?;
    // redis-benchmark counts an error reply as a request: make sure none was (after the dump,
    // so this INFO is not in it).
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut con)
        .map_err(|e| format!("INFO commandstats: {e}"))?;
    let failed: u64 = parse_commandstats(&info)
        .values()
        .map(|s| s.failed_calls)
        .sum();
    if failed > 0 {
        return Err(format!(
            "{}: {failed} calls failed under callgrind: {info}",
            profile.label
        ));
    }
    drop(con);
    server.stop();

    let data = std::fs::read_to_string(&dump)
        .map_err(|e| format!("read the callgrind dump {}: {e}", dump.display()))?;
    let total: f64 = data
        .lines()
        .find_map(|line| {
            line.strip_prefix("summary:")
                .or_else(|| line.strip_prefix("totals:"))
        })
        .and_then(|v| v.trim().parse().ok())
        .ok_or("no totals in the callgrind dump")?;
    let per_call = total / profile.calls as f64;
    eprintln!(
        "callgrind {:<48} {per_call:>8.0} Ir/call ({} calls){}",
        profile.label,
        profile.calls,
        if module.is_some() {
            ", baseline module"
        } else {
            ""
        }
    );

    let mut command = Command::new("callgrind_annotate");
    command.args(["--inclusive=yes", "--threshold=100"]);
    command.arg(&dump);
    let annotated = run_bounded(command, Duration::from_secs(120))?;
    let mut breakdown = Vec::new();
    for (name, meaning) in BREAKDOWN {
        let ir = annotated.lines().find_map(|line| {
            let (count, rest) = line.trim().split_once(' ')?;
            names_function(rest, name).then(|| count.replace(',', "").parse::<f64>().ok())?
        });
        if let Some(ir) = ir.filter(|ir| *ir > 0.0) {
            breakdown.push(((*name).to_owned(), ir / profile.calls as f64, *meaning));
        }
    }
    Ok((profile.label.to_owned(), per_call, breakdown))
}

/// Whether a callgrind_annotate line (after its count) names the function `name`: `name`
/// occurs where an identifier starts, so `getCommand` is not found in `hmgetCommand`.
fn names_function(line: &str, name: &str) -> bool {
    line.match_indices(name).any(|(at, _)| {
        line[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_are_found_by_their_whole_name() {
        let hmget = "(3.88%)  t_hash.c:hmgetCommand [/usr/bin/redis-server]";
        assert!(names_function(hmget, "hmgetCommand "));
        assert!(!names_function(hmget, "getCommand "));
        assert!(names_function("(1%)  ???:getCommand [x]", "getCommand "));
        assert!(names_function("(9%)  server.c:call [x]", "server.c:call "));
        assert!(!names_function(
            "(9%)  server.c:call'2 [x]",
            "server.c:call "
        ));
    }

    /// Each baseline profile repeats the profile before it, on the baseline module.
    #[test]
    fn baseline_profiles_follow_theirs() {
        assert!(profiles(true, false).iter().all(|p| !p.baseline));
        let profiles = profiles(false, true);
        let mut names: Vec<_> = profiles.iter().map(|p| p.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), profiles.len(), "one file per profile");
        let baseline: Vec<_> = profiles
            .iter()
            .enumerate()
            .filter(|(_, p)| p.baseline)
            .collect();
        assert_eq!(baseline.len(), 3);
        for (i, p) in baseline {
            let new = &profiles[i - 1];
            assert!(!new.baseline);
            assert_eq!(
                (
                    new.label,
                    &new.command,
                    new.setup,
                    new.random_keys,
                    new.calls
                ),
                (p.label, &p.command, p.setup, p.random_keys, p.calls)
            );
        }
        assert!(profiles.iter().any(|p| p.label == HAND));
    }
}

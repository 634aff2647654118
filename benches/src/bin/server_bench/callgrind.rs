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
use throttle_benches::{commandstats, info, load_scripts};
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
/// The label of the empty library function's profile, which the library's are also given
/// against (what is left is the Lua work of the call).
const FLOOR: &str = "FCALL_RO throttle_version (an empty function)";

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
        // The floor of any library call: FCALL of a function that only returns a number.
        profile(
            "fcall-floor",
            FLOOR,
            "FCALL_RO throttle_version 0",
            None,
            None,
            1_000,
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
        // Generic over the command: a prefix (no space), the type follows in `<..>`.
        "redis_throttle_module::handler::one_key<",
        "THROTTLE.TAKE's handler (the one-key commands' handler)",
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
    (
        "ThrottleCommand>::parse ",
        "TakeArgs::parse where the args are the command (`<TakeArgs as ThrottleCommand>`)",
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
        "luaCreateArray ",
        "KEYS and ARGV: the two tables built for every call",
    ),
    (
        "lua_pcall ",
        "the Lua code itself (luaCallFunction less KEYS, ARGV and the reply)",
    ),
    (
        "luaReplyToRedisReply ",
        "the returned table converted to the RESP reply",
    ),
    (
        "luaD_precall ",
        "function calls in the VM, Lua and C (redis.call, tonumber, string.byte, ...)",
    ),
    (
        "luaH_new ",
        "tables created (the reply; redis.call's arguments and replies; the script's own)",
    ),
    (
        "luaS_newlstr ",
        "strings created or interned (the arguments, the replies, the state)",
    ),
    ("str_byte ", "string.byte (reading the state)"),
    ("str_char ", "string.char (writing the state)"),
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
            .map_or(f64::NAN, |(_, r)| r.per_call)
    };
    let incr = results[0].per_call;
    let hand = per_call(HAND);
    let floor = per_call(FLOOR);
    let mut text = String::new();
    let _ = writeln!(
        text,
        "\n## Callgrind: instructions per call (Ir inside processCommand, one client, -P 16)\n"
    );
    let _ = writeln!(
        text,
        "Instruction counts do not depend on the machine's load: these are the figures to compare \
         across runs. Above the empty FCALL: a library call's Ir less those of \
         `FCALL_RO throttle_version 0`, a function that only returns a number (the Lua work of \
         the call: its code, its redis.call commands, its tables and strings).\n"
    );
    let _ = writeln!(
        text,
        "| command | Ir/call | x INCR | x hand-written | above the empty FCALL |"
    );
    let _ = writeln!(text, "|---|---:|---:|---:|---:|");
    for (result, profile) in results.iter().zip(&profiles) {
        if profile.baseline {
            continue;
        }
        let per_call = result.per_call;
        let above = if profile.command.starts_with("FCALL throttle_") {
            format!("{:.0}", per_call - floor)
        } else {
            "-".to_owned()
        };
        let _ = writeln!(
            text,
            "| {} | {per_call:.0} | {:.1} | {:.2} | {above} |",
            result.label,
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
            "Module code: the Ir of the module's own code alone (exclusive: its Rust functions \
             and the Rust library code inlined in them, not the server functions it calls).\n"
        );
        let _ = writeln!(
            text,
            "| command | Ir/call | Ir/call baseline | new/baseline | module code | \
             module code baseline | difference |"
        );
        let _ = writeln!(text, "|---|---:|---:|---:|---:|---:|---:|");
        for (i, profile) in profiles.iter().enumerate().skip(1) {
            if profile.baseline {
                let (new, old) = (&results[i - 1], &results[i]);
                let _ = writeln!(
                    text,
                    "| {} | {:.0} | {:.0} | {:.3} | {:.0} | {:.0} | {:+.0} |",
                    profile.label,
                    new.per_call,
                    old.per_call,
                    new.per_call / old.per_call,
                    new.module_code,
                    old.module_code,
                    new.module_code - old.module_code,
                );
            }
        }
    }
    for (result, profile) in results.iter().zip(&profiles) {
        let (label, breakdown) = (&result.label, &result.breakdown);
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

/// What one profile measured.
struct Measured {
    label: String,
    /// Ir per call inside processCommand.
    per_call: f64,
    /// (function, its inclusive Ir per call, what it is), for the [`BREAKDOWN`] functions
    /// that appear.
    breakdown: Vec<(String, f64, &'static str)>,
    /// Exclusive Ir per call of the module's own code (0 for the commands without it).
    module_code: f64,
}

/// Starts a server under callgrind, zeroes the counters once it is ready, runs the calls,
/// dumps, and reads the totals. With `module`, the server loads that module (the baseline)
/// instead of ours.
fn profile_one(
    options: &Options,
    out: &Path,
    profile: &Profile,
    module: Option<&Path>,
) -> Result<Measured, String> {
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
    let info = info(&mut con, "server")?;
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
    let failed: u64 = commandstats(&mut con)?
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
    let mut command = Command::new("callgrind_annotate");
    command.arg("--threshold=100");
    command.arg(&dump);
    let exclusive = run_bounded(command, Duration::from_secs(120))?;
    Ok(Measured {
        label: profile.label.to_owned(),
        per_call,
        breakdown,
        module_code: module_code(&exclusive) / profile.calls as f64,
    })
}

/// The Ir of the module's own code in an exclusive callgrind_annotate listing: the functions
/// whose source is the module's (`module/src/`, `module/bucket/src/`), the Rust standard
/// library's inlined in them (`/rustc/`) or a Rust dependency's (`.cargo/registry/`). Only the
/// function summary is read (it ends where the annotated sources begin).
fn module_code(listing: &str) -> f64 {
    let mut total = 0.0;
    for line in listing
        .lines()
        .take_while(|line| !line.starts_with("-- Auto-annotated source"))
    {
        let Some((count, rest)) = line.trim().split_once(' ') else {
            continue;
        };
        let Ok(count) = count.replace(',', "").parse::<f64>() else {
            continue;
        };
        // "(12.34%)  path/file.rs:function [object]"
        let Some((_, located)) = rest.split_once(')') else {
            continue;
        };
        let Some((file, _)) = located.trim().split_once(':') else {
            continue;
        };
        let ours = file.contains("module/src/")
            || file.contains("module/bucket/src/")
            || file.starts_with("/rustc/")
            || file.contains(".cargo/registry/");
        if ours {
            total += count;
        }
    }
    total
}

/// Whether a callgrind_annotate line (after its count) names the function `name`: `name`
/// occurs where an identifier starts, so `getCommand` is not found in `hmgetCommand`; a name
/// that ends in a space must also end there (`server.c:call ` is not `server.c:call'2`), at a
/// space or at the end of the line: callgrind_annotate puts the `[object]` after a function
/// on one of its lines only, which one depending on the directory it runs in.
fn names_function(line: &str, name: &str) -> bool {
    let whole = name.ends_with(' ');
    let name = name.trim_end();
    line.match_indices(name).any(|(at, _)| {
        let starts = line[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        let ends = !whole
            || line[at + name.len()..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace);
        starts && ends
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_code_is_the_module_source() {
        let listing = "\
Ir                   file:function
--------------------------------------------------------------------------------
1,000 (10.00%)  /project/redis-8.2.3/src/server.c:call [/x/redis-server]
  300 ( 3.00%)  /work/main/module/src/take.rs:redis_throttle_module::take::command [/x/lib.so]
  200 ( 2.00%)  baseline-src/module/bucket/src/take.rs:throttle_bucket::take::take
   40 ( 0.40%)  /rustc/5980/library/core/src/slice/iter.rs:throttle_bucket::take::take
    7 ( 0.07%)  ./string/../sysdeps/x86_64/multiarch/memmove.S:__memcpy [/lib/libc.so.6]
-- Auto-annotated source: /work/main/module/src/take.rs
  300 ( 3.00%)  pub fn command() {
";
        assert_eq!(module_code(listing), 540.0);
    }

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
        // The `[object]` is on another line of the same function (run from another directory).
        assert!(names_function(
            "(88.90%)  /w/module/src/take.rs:redis_throttle_module::take::command",
            "redis_throttle_module::take::command "
        ));
        assert!(!names_function(
            "(1%)  /w/take.rs:redis_throttle_module::take::command_x",
            "redis_throttle_module::take::command "
        ));
        // A name without the space is a prefix.
        assert!(names_function(
            "(1%)  x.c:callReplyCreateError [y]",
            "callReplyCreate"
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

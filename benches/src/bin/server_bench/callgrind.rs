//! Callgrind: instructions per call inside `processCommand`, and where they go, for each
//! command, each on its own server under `valgrind --tool=callgrind`. Instruction counts do not
//! depend on the load of a shared machine.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use redis::Value;
use throttle_benches::load_lua_take;
use throttle_testkit::info_field;
use throttle_testkit::Server;

use crate::child::run_bounded;
use crate::{require, words, Options, CHILD_TIMEOUT, STATE_LIKE_INT};

/// One profiled workload: `calls` calls of `command`, one client, pipelined by 16.
struct Profile {
    name: &'static str,
    label: &'static str,
    command: String,
    random_keys: Option<u32>,
    setup: Option<&'static str>,
    calls: u64,
}

fn profiles(quick: bool) -> Vec<Profile> {
    let scale = if quick { 1 } else { 4 };
    let profile = |name, label, command: &str, random_keys, setup, calls: u64| Profile {
        name,
        label,
        command: command.to_owned(),
        random_keys,
        setup,
        calls: calls * scale,
    };
    vec![
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
        profile(
            "take-reserved",
            "THROTTLE.TAKE MAXWAIT (reserved)",
            "THROTTLE.TAKE bench:reserve 1 1000 MAXWAIT 315360000000",
            None,
            None,
            5_000,
        ),
        profile(
            "evalsha",
            "EVALSHA script, hot key, granted",
            "EVALSHA {sha} 1 bench:lua take 1000000 1000000000",
            None,
            None,
            1_000,
        ),
    ]
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
    ("redis_throttle::take::command ", "THROTTLE.TAKE's handler"),
    (
        "RM_Call ",
        "every RM_Call as a whole (THROTTLE.PEEK's GET; none in THROTTLE.TAKE)",
    ),
    (
        "server.c:call'2 ",
        "the commands run inside (the script's GET, TIME, SET)",
    ),
    (
        "moduleCreateArgvFromUserFormat ",
        "RM_Replicate: build SET's argv from the format (the state and PXAT)",
    ),
    ("getCommand ", "GET's own work (the module's read)"),
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
    ("throttle_bucket::take::TakeArgs::parse", "TakeArgs::parse"),
    ("throttle_bucket::take::take ", "take (the arithmetic)"),
    (
        "throttle_bucket::state::parse_state",
        "parse_state (the stored 8 bytes)",
    ),
    ("evalShaCommand ", "EVALSHA as a whole"),
    ("luaCallFunction ", "running the script's function"),
    (
        "luaRedisGenericCommand ",
        "redis.call/pcall (GET, TIME, SET) incl. argument and reply conversion",
    ),
    ("luaV_execute ", "the Lua VM (includes the redis.call time)"),
    ("luaB_tonumber ", "tonumber(): strtod"),
    ("str_format ", "string.format"),
    ("str_find_aux ", "string.find/match"),
    ("luaC_step ", "Lua garbage collector"),
];

pub fn callgrind(options: &Options, out: &Path) -> Result<String, String> {
    require("callgrind_annotate", "apt-get install valgrind")?;
    let mut results = Vec::new();
    for profile in profiles(options.quick) {
        results.push(profile_one(options, out, &profile)?);
    }
    let incr = results[0].1;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "\n## Callgrind: instructions per call (Ir inside processCommand, one client, -P 16)\n"
    );
    let _ = writeln!(text, "| command | Ir/call | x INCR |");
    let _ = writeln!(text, "|---|---:|---:|");
    for (label, per_call, _) in &results {
        let _ = writeln!(text, "| {label} | {per_call:.0} | {:.1} |", per_call / incr);
    }
    for (label, _, breakdown) in &results {
        if breakdown.is_empty() {
            continue;
        }
        let _ = writeln!(text, "\n{label}: inclusive Ir per call\n");
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
/// dumps, and reads the totals. Returns (label, Ir per call, breakdown).
#[allow(clippy::type_complexity)]
fn profile_one(
    options: &Options,
    out: &Path,
    profile: &Profile,
) -> Result<(String, f64, Vec<(String, f64, &'static str)>), String> {
    let file = out.join(format!("callgrind.{}.out", profile.name));
    let dump = PathBuf::from(format!("{}.1", file.display()));
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&dump);
    let out_arg = format!("--callgrind-out-file={}", file.display());
    let mut server = Server::builder(options.flavor)
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
    let sha = load_lua_take(&mut con).map_err(|e| format!("SCRIPT LOAD: {e}"))?;
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
    control("-z")?;
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
    command.args(words(&profile.command.replace("{sha}", &sha)));
    run_bounded(command, CHILD_TIMEOUT)?;
    control("-d")?;
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
        "callgrind {:<34} {per_call:>8.0} Ir/call ({} calls)",
        profile.label, profile.calls
    );

    let mut command = Command::new("callgrind_annotate");
    command.args(["--inclusive=yes", "--threshold=100"]);
    command.arg(&dump);
    let annotated = run_bounded(command, Duration::from_secs(120))?;
    let mut breakdown = Vec::new();
    for (name, meaning) in BREAKDOWN {
        let ir = annotated.lines().find_map(|line| {
            let (count, rest) = line.trim().split_once(' ')?;
            rest.contains(name)
                .then(|| count.replace(',', "").parse::<f64>().ok())?
        });
        if let Some(ir) = ir.filter(|ir| *ir > 0.0) {
            breakdown.push(((*name).to_owned(), ir / profile.calls as f64, *meaning));
        }
    }
    Ok((profile.label.to_owned(), per_call, breakdown))
}

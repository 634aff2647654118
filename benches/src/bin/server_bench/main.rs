//! Side-by-side server benchmarks of THROTTLE.TAKE (issues 5, 19, 21), against one server
//! with the release module loaded:
//!
//! - throughput: `redis-benchmark` runs of INCR, SET, THROTTLE.TAKE (hot key granted, hot key
//!   denied, 100k random keys, with MAXWAIT), the hand-written token bucket script
//!   (`benches/lua/hand_written_bucket.lua`), FCALL of the function library (bare and with the
//!   words the client sends; and `FCALL_RO throttle_version 0`, an empty function, the floor of
//!   any library call) and EVALSHA of the Lua script, interleaved, at pipelining 1 and
//!   16; medians over the repetitions, ops/s and server µs per call (from `INFO commandstats`)
//!   as ratios against INCR, and against the hand-written script, in the same repetition;
//! - memory: `used_memory` per key for 1,000,000 buckets that are not full, against
//!   `SET key <int> PX`, the Lua script's keys and the hand-written script's hashes, and for
//!   paused buckets (the 32-byte pushback state);
//! - client: 64 concurrent waiters on one key through the `redis-throttle` client; round trips
//!   per granted call for the reservation strategy and the polling strategy;
//! - callgrind: instructions per call, and where they go, under `valgrind --tool=callgrind`.
//!
//! With `--redis-cell PATH/libredis_cell.so` the server also loads redis-cell, and the throughput
//! and memory sections add its `CL.THROTTLE` with the same quotas, interleaved with the rest.
//!
//! With `--baseline-module PATH/libredis_throttle_module.so` (an earlier build of this module) a
//! second server of the same flavor loads it, and THROTTLE.TAKE's rows (throughput: hot key
//! granted and denied, random keys; memory: the plain buckets and the paused ones; callgrind:
//! hot key granted and denied, warm random keys, with the Ir of the module's own code) run on
//! both, interleaved, with the ratio new/baseline. In the
//! throughput section the pairs run on two servers started alike, one with each module, that
//! hold nothing but the pairs' keys (the first server also holds every other row's keys).
//!
//! `benches/server-bench.sh [--quick]` builds what it needs and runs this. Every loop and every
//! child process is bounded; the server is the test kit's, on a free loopback port.

mod callgrind;
mod child;
mod client;
mod memory;
mod throughput;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use throttle_benches::load_scripts;
use throttle_testkit::{module_path, Flavor, Server};

const USAGE: &str = "\
usage: server-bench [--quick] [--server NAME] [--only SECTION]... [--reps N] [--seconds S]
                    [--clients N] [--keys N] [--out DIR] [--redis-cell PATH]
                    [--baseline-module PATH]

  --quick         a smoke run (~1 min): 3 short repetitions, 100,000 keys, fewer profiled calls
  --server NAME   redis-8.2 (default), redis-7.0, valkey-8.1 or valkey-9.1
  --only SECTION  throughput, memory, client or callgrind (repeatable; default: all,
                  callgrind only where valgrind is installed)
  --reps N        repetitions of the throughput runs (default 3, at least 3 counts as a result)
  --seconds S     target length of one redis-benchmark run (default 3, quick 0.4)
  --clients N     redis-benchmark connections (default 50)
  --keys N        buckets for the memory figures (default 1000000, quick 100000)
  --out DIR       where results.md and the callgrind files go
                  (default target/server-bench/<server>)
  --redis-cell PATH  also load this prebuilt redis-cell module (libredis_cell.so) and measure
                  its CL.THROTTLE with the same quotas (throughput and memory sections)
  --baseline-module PATH  an earlier build of this module (libredis_throttle_module.so): a
                  second server of the same flavor loads it, and THROTTLE.TAKE's rows run on
                  both, interleaved, with the ratios new/baseline (throughput, memory, callgrind)

The module is target/release/libredis_throttle_module.so (THROTTLE_MODULE overrides it); build it
with `cargo build --release -p redis-throttle-module`, or run benches/server-bench.sh.";

/// A state-sized integer: the value of the `SET key <int> PX` baseline.
const STATE_LIKE_INT: &str = "1796024257214135340";
/// Longest one redis-benchmark or valgrind child may run before it is killed.
const CHILD_TIMEOUT: Duration = Duration::from_secs(180);

#[derive(Clone, Debug)]
pub struct Options {
    quick: bool,
    flavor: Flavor,
    sections: Vec<Section>,
    reps: usize,
    seconds: f64,
    clients: u32,
    keys: u64,
    out: Option<PathBuf>,
    /// A prebuilt redis-cell module to load beside ours and compare with.
    redis_cell: Option<PathBuf>,
    /// An earlier build of this module, loaded by a second server, to compare with.
    baseline_module: Option<PathBuf>,
}

/// Which server a workload runs on: the one with this module, the one with the baseline build
/// (`--baseline-module`), or the throughput section's twin of the baseline's with this module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Main = 0,
    Baseline = 1,
    /// Started as the baseline server is, with this module: the other half of each pair.
    Paired = 2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Section {
    Throughput,
    Memory,
    Client,
    Callgrind,
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        quick: false,
        flavor: Flavor::Redis82,
        sections: Vec::new(),
        reps: 3,
        seconds: 3.0,
        clients: 50,
        keys: 1_000_000,
        out: None,
        redis_cell: None,
        baseline_module: None,
    };
    let (mut seconds, mut keys) = (None, None);
    let mut rest = args;
    while let [flag, tail @ ..] = rest {
        let mut value = || -> Result<&String, String> {
            let value = tail.first().ok_or(format!("{flag} needs a value"))?;
            rest = &tail[1..];
            Ok(value)
        };
        match flag.as_str() {
            "--quick" => {
                options.quick = true;
                rest = tail;
            }
            "--server" => {
                let name = value()?;
                options.flavor = Flavor::ALL
                    .into_iter()
                    .find(|f| f.name() == name)
                    .ok_or(format!("unknown server {name}"))?;
            }
            "--only" => options.sections.push(match value()?.as_str() {
                "throughput" => Section::Throughput,
                "memory" => Section::Memory,
                "client" => Section::Client,
                "callgrind" => Section::Callgrind,
                other => return Err(format!("unknown section {other}")),
            }),
            "--reps" => options.reps = number(value()?, 1.0, 100.0)? as usize,
            "--seconds" => seconds = Some(number(value()?, 0.05, 60.0)?),
            "--clients" => options.clients = number(value()?, 1.0, 1000.0)? as u32,
            "--keys" => keys = Some(number(value()?, 1000.0, 10_000_000.0)? as u64),
            "--out" => options.out = Some(PathBuf::from(value()?)),
            "--redis-cell" => options.redis_cell = Some(PathBuf::from(value()?)),
            "--baseline-module" => options.baseline_module = Some(PathBuf::from(value()?)),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    options.seconds = seconds.unwrap_or(if options.quick { 0.4 } else { 3.0 });
    options.keys = keys.unwrap_or(if options.quick { 100_000 } else { 1_000_000 });
    Ok(options)
}

fn number(text: &str, min: f64, max: f64) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|v| (min..=max).contains(v))
        .ok_or(format!("{text}: expected a number from {min} to {max}"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse_options(&args) {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("server-bench: {message}\n");
            }
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(message) = run(&options) {
        eprintln!("server-bench: {message}");
        std::process::exit(1);
    }
}

fn run(options: &Options) -> Result<(), String> {
    require("redis-benchmark", "apt-get install redis-tools")?;
    // Absolute: the server resolves a relative path in its data dir (THROTTLE_MODULE=target/...
    // would not load).
    let module = module_path();
    let module = std::fs::canonicalize(&module)
        .map_err(|e| format!("the module {}: {e}", module.display()))?;
    // Every server of this run loads this one library, even if the sources change while it
    // runs (the kit takes THROTTLE_MODULE as given). Set before any thread is started.
    std::env::set_var("THROTTLE_MODULE", &module);
    if !module.to_string_lossy().contains("/release/") {
        eprintln!(
            "server-bench: warning: {} is not a release build; figures will be off",
            module.display()
        );
    }
    let out = options.out.clone().unwrap_or_else(|| {
        // CARGO_MANIFEST_DIR is <workspace>/benches.
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap_or(Path::new("."));
        workspace
            .join("target/server-bench")
            .join(options.flavor.name())
    });
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let all = options.sections.is_empty();
    let wants = |s: Section| all || options.sections.contains(&s);
    let started = Instant::now();
    // Absolute (the server resolves a relative path in its data dir) and checked up front.
    let redis_cell = match &options.redis_cell {
        Some(path) => Some(module_file("--redis-cell", path)?),
        None => None,
    };
    let baseline_module = match &options.baseline_module {
        Some(path) => Some(module_file("--baseline-module", path)?),
        None => None,
    };
    if (redis_cell.is_some() || baseline_module.is_some())
        && module.to_string_lossy().contains(char::is_whitespace)
    {
        return Err(format!(
            "{}: with --redis-cell or --baseline-module, the module path cannot hold \
             whitespace (it is passed as a config value, which is split into words)",
            module.display()
        ));
    }
    if redis_cell.is_none() && (wants(Section::Throughput) || wants(Section::Memory)) {
        eprintln!(
            "server-bench: redis-cell's CL.THROTTLE is not compared; to add it, pass \
             --redis-cell PATH/libredis_cell.so (README, \"Benchmarks\")"
        );
    }

    let mut report = String::new();
    let _ = writeln!(
        report,
        "server-bench on {} ({}), module {}, {} clients{}\n",
        options.flavor,
        options.flavor.binary()?.display(),
        module.display(),
        options.clients,
        if options.quick { ", --quick" } else { "" }
    );
    if let Some(cell) = &redis_cell {
        let _ = writeln!(
            report,
            "redis-cell loaded beside it: {} (CL.THROTTLE rows)\n",
            cell.display()
        );
    }
    if let Some(baseline) = &baseline_module {
        let _ = writeln!(
            report,
            "baseline module, on a second server: {} ((baseline module) rows)\n",
            baseline.display()
        );
    }
    // results.md for a whole run; results-<sections>.md for a partial one.
    let file = if all {
        out.join("results.md")
    } else {
        let names: Vec<String> = options
            .sections
            .iter()
            .map(|s| format!("{s:?}").to_lowercase())
            .collect();
        out.join(format!("results-{}.md", names.join("-")))
    };
    // Written after every section, so a failure later keeps what was measured.
    let save = |report: &str| -> Result<(), String> {
        std::fs::write(&file, report).map_err(|e| format!("write {}: {e}", file.display()))
    };
    if wants(Section::Throughput) || wants(Section::Memory) || wants(Section::Client) {
        let server = match &redis_cell {
            None => Server::start(options.flavor),
            // `--loadmodule` twice: a `loadmodule` of ours replaces the kit's default one.
            Some(cell) => Server::builder(options.flavor)
                .module(false)
                .arg("loadmodule", &module.display().to_string())
                .arg("loadmodule", &cell.display().to_string())
                .start(),
        };
        let mut con = server.conn();
        let scripts = load_scripts(&mut con)?;
        // The Lua is the client's working copy at build time: its SHA1 and the version the
        // loaded library reports say which one ran.
        let version: i64 = redis::cmd("FCALL_RO")
            .arg("throttle_version")
            .arg(0)
            .query(&mut con)
            .map_err(|e| format!("FCALL_RO throttle_version 0: {e}"))?;
        let _ = writeln!(
            report,
            "Lua measured: client/lua/throttle.lua as built into this driver, SHA1 {} \
             (the library says version {version})\n",
            scripts.twin,
        );
        let cell = redis_cell.is_some();
        if cell {
            check_redis_cell(&mut con)?;
        }
        // Closed: the memory section waits until its probe is the only client.
        drop(con);
        // Only THROTTLE.TAKE runs there: no scripts to load.
        let baseline = match &baseline_module {
            Some(path) if wants(Section::Throughput) || wants(Section::Memory) => {
                Some(module_server(options.flavor, path, "--baseline-module")?)
            }
            _ => None,
        };
        if wants(Section::Throughput) {
            // The pairs' servers, each with the pairs' keys only.
            let pair = match &baseline {
                Some(baseline) => Some((
                    module_server(options.flavor, &module, "the module")?,
                    baseline,
                )),
                None => None,
            };
            report.push_str(&throughput::throughput(
                options,
                &server,
                pair.as_ref().map(|(paired, baseline)| (paired, *baseline)),
                &scripts,
                cell,
            )?);
            save(&report)?;
        }
        if wants(Section::Memory) {
            report.push_str(&memory::memory(
                options,
                &server,
                baseline.as_ref(),
                &scripts,
                cell,
            )?);
            save(&report)?;
        }
        if wants(Section::Client) {
            report.push_str(&client::overhead(options, &server)?);
            report.push_str(&client::waiters(options, &server)?);
            save(&report)?;
        }
    }
    if wants(Section::Callgrind) {
        if require("valgrind", "apt-get install valgrind").is_ok() {
            report.push_str(&callgrind::callgrind(
                options,
                &out,
                baseline_module.as_deref(),
            )?);
        } else if !all {
            return Err("valgrind is not installed (apt-get install valgrind)".into());
        } else {
            report.push_str("\n(callgrind skipped: valgrind is not installed)\n");
        }
    }
    let _ = writeln!(
        report,
        "\ntotal time {:.0} s",
        started.elapsed().as_secs_f64()
    );
    save(&report)?;
    println!("{report}");
    eprintln!("server-bench: results in {}", file.display());
    Ok(())
}

/// A module library (`flag`'s value) as the server must be given it: an existing file,
/// absolute, with no whitespace (the kit splits a config value into words).
fn module_file(flag: &str, path: &Path) -> Result<PathBuf, String> {
    let absolute =
        std::fs::canonicalize(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    if !absolute.is_file() {
        return Err(format!("{flag} {}: not a file", path.display()));
    }
    if absolute.to_string_lossy().contains(char::is_whitespace) {
        return Err(format!(
            "{flag} {}: a path with whitespace cannot be passed to --loadmodule; \
             copy the library elsewhere",
            absolute.display()
        ));
    }
    Ok(absolute)
}

/// A server that loads this module library (`module_file`'s path, e.g. the baseline's) instead
/// of the kit's default.
pub(crate) fn baseline_builder(flavor: Flavor, module: &Path) -> throttle_testkit::ServerBuilder {
    Server::builder(flavor)
        .module(false)
        .arg("loadmodule", &module.display().to_string())
}

/// A server with this module library (`what` names it in errors), checked to answer
/// THROTTLE.TAKE.
fn module_server(flavor: Flavor, module: &Path, what: &str) -> Result<Server, String> {
    let server = baseline_builder(flavor, module)
        .try_start()
        .map_err(|e| format!("{what} {}: {e}", module.display()))?;
    let mut con = server.conn();
    let reply: Vec<redis::Value> = redis::cmd("THROTTLE.TAKE")
        .arg(words("bench:baseline:check 10 1"))
        .query(&mut con)
        .map_err(|e| format!("THROTTLE.TAKE on {what} {}: {e}", module.display()))?;
    if reply.first() != Some(&redis::Value::Int(1)) {
        return Err(format!(
            "THROTTLE.TAKE bench:baseline:check 10 1 on {what} {} replied {reply:?}",
            module.display()
        ));
    }
    let _: redis::Value = redis::cmd("DEL")
        .arg("bench:baseline:check")
        .query(&mut con)
        .map_err(|e| format!("DEL: {e}"))?;
    Ok(server)
}

/// Both modules answer, and CL.THROTTLE replies as redis-cell 0.2 does: five integers, the
/// first 0 when allowed. (A module loaded under another name would fail here, not mid-run.)
fn check_redis_cell(con: &mut redis::Connection) -> Result<(), String> {
    let reply: Vec<i64> = redis::cmd("CL.THROTTLE")
        .arg(words("bench:cell:check 9 1 1000"))
        .query(con)
        .map_err(|e| format!("CL.THROTTLE (is --redis-cell a redis-cell module?): {e}"))?;
    let _: redis::Value = redis::cmd("DEL")
        .arg("bench:cell:check")
        .query(con)
        .map_err(|e| format!("DEL: {e}"))?;
    if reply.len() != 5 || reply[0] != 0 || reply[1] != 10 || reply[2] != 9 {
        return Err(format!(
            "CL.THROTTLE bench:cell:check 9 1 1000 replied {reply:?}, \
             expected [0, 10, 9, -1, 1000] as redis-cell 0.2 does"
        ));
    }
    Ok(())
}

/// The words of a command line.
fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

pub(crate) fn require(program: &str, hint: &str) -> Result<(), String> {
    let found = Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    if found {
        Ok(())
    } else {
        Err(format!("{program} not found ({hint})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, String> {
        parse_options(&args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn options() {
        let defaults = parse(&[]).unwrap();
        assert_eq!(
            (defaults.flavor, defaults.reps, defaults.keys),
            (Flavor::Redis82, 3, 1_000_000)
        );
        let quick = parse(&["--quick", "--server", "valkey-9.1", "--only", "memory"]).unwrap();
        assert!(quick.quick);
        assert_eq!(quick.flavor, Flavor::Valkey91);
        assert_eq!(quick.sections, [Section::Memory]);
        assert_eq!(quick.keys, 100_000);
        assert!(parse(&["--reps"]).is_err());
        assert!(parse(&["--reps", "0"]).is_err());
        assert!(parse(&["--server", "redis-6"]).is_err());
        assert!(parse(&["--bogus"]).is_err());
        assert_eq!(defaults.redis_cell, None);
        let cell = parse(&["--redis-cell", "/x/libredis_cell.so"]).unwrap();
        assert_eq!(cell.redis_cell, Some(PathBuf::from("/x/libredis_cell.so")));
        assert!(parse(&["--redis-cell"]).is_err());
        assert_eq!(defaults.baseline_module, None);
        let base = parse(&["--baseline-module", "/b/libredis_throttle_module.so"]).unwrap();
        assert_eq!(
            base.baseline_module,
            Some(PathBuf::from("/b/libredis_throttle_module.so"))
        );
        assert!(parse(&["--baseline-module"]).is_err());
    }

    #[test]
    fn module_file_is_checked() {
        let err = module_file("--redis-cell", Path::new("/nonexistent/libredis_cell.so"));
        assert!(err.unwrap_err().starts_with("--redis-cell /nonexistent"));
        assert!(module_file("--baseline-module", Path::new("/")).is_err());
        // Tests run in the package dir: a relative path comes back absolute.
        let absolute = module_file("--redis-cell", Path::new("Cargo.toml")).unwrap();
        assert!(absolute.is_absolute() && absolute.ends_with("benches/Cargo.toml"));
    }
}

//! What the demos' scenario tests (`client/demo/tests/scenario.rs`,
//! `client/ingest-demo/tests/scenario.rs`) share: running the demo binary to its `--json`
//! summary within a bound, one run at a time, watching its stderr, stopping it with a
//! signal, and checking that nothing it started is left. Test code: what it does not find,
//! it panics on. Each test file includes it (`#[path] #[macro_use] mod scenario_tests;`), and
//! uses what it needs of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The runs take turns: each one times a bucket to the millisecond, and two cores shared
/// with parallel runs would make that a test of the scheduler.
pub fn turn() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The demo binary `name` of the test crate this is written in (its `CARGO_BIN_EXE_<name>`,
/// its `CARGO_TARGET_TMPDIR`), whose runs to the end take `run_limit` at most.
macro_rules! demo_binary {
    ($name:literal, $run_limit:expr) => {
        crate::scenario_tests::Demo {
            name: $name,
            exe: env!(concat!("CARGO_BIN_EXE_", $name)),
            tmp_dir: env!("CARGO_TARGET_TMPDIR"),
            run_limit: $run_limit,
        }
    };
}

/// A demo binary, as its test crate sees it (`demo_binary!`).
#[derive(Debug, Clone, Copy)]
pub struct Demo {
    /// "pix-demo".
    pub name: &'static str,
    /// `env!("CARGO_BIN_EXE_<name>")`.
    pub exe: &'static str,
    /// `env!("CARGO_TARGET_TMPDIR")`: where the runs' charts go.
    pub tmp_dir: &'static str,
    /// The longest a run to its end may take.
    pub run_limit: Duration,
}

impl Demo {
    /// The chart of the run called `run`.
    pub fn chart_path(&self, run: &str) -> PathBuf {
        PathBuf::from(self.tmp_dir).join(format!("{}-{run}.svg", self.name))
    }

    /// The demo with `--json`, its chart in [`Demo::chart_path`], the module built from this
    /// workspace, and `args`.
    pub fn command(&self, run: &str, args: &[&str]) -> Command {
        let mut command = Command::new(self.exe);
        // The module the demo's private Redis loads: the kit's, which it refuses when stale.
        let module = throttle_testkit::try_module_path().unwrap_or_else(|why| panic!("{why}"));
        command
            .env("THROTTLE_MODULE", module)
            .arg("--json")
            .arg("--chart")
            .arg(self.chart_path(run))
            .args(args);
        command
    }

    /// Runs the demo to the end and returns its JSON summary.
    pub fn run(&self, run: &str, args: &[&str]) -> Value {
        let name = self.name;
        let output = self.output_within(self.command(run, args), self.run_limit);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "{name} {args:?} failed ({}):\n{stderr}",
            output.status
        );
        let summary: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "{name} printed no JSON ({e}):\n{}\n{stderr}",
                String::from_utf8_lossy(&output.stdout)
            )
        });
        // The human report goes to stderr in --json mode; shown when a test fails or with
        // --nocapture.
        eprintln!("{stderr}");
        summary
    }

    /// `command.output()`, but killed if it has not finished in `limit`.
    pub fn output_within(&self, mut command: Command, limit: Duration) -> Output {
        let name = self.name;
        let child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let pid = child.id();
        let (done, finished) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let output = child.wait_with_output();
            let _ = done.send(());
            output
        });
        if finished.recv_timeout(limit).is_err() {
            signal(pid, "KILL");
            panic!("{name} did not finish within {limit:?}");
        }
        waiter
            .join()
            .unwrap()
            .unwrap_or_else(|e| panic!("wait for {name}: {e}"))
    }

    /// Starts the demo (`args`), waits for a line on its stderr that contains `after`, sends
    /// it the signal `name` (`INT`, `KILL`) and waits for its exit: the exit status, and what
    /// it had printed by then.
    pub fn signal_midway(
        &self,
        run: &str,
        args: &[&str],
        after: &str,
        name: &str,
    ) -> (ExitStatus, String) {
        let (mut child, lines) = self.start_watched(run, args);
        let seen = wait_for(&lines, after);
        signal(child.id(), name);
        let status = self.wait_exit(&mut child, Duration::from_secs(20));
        (status, seen)
    }

    /// Starts the demo with its stderr lines coming through a channel.
    fn start_watched(&self, run: &str, args: &[&str]) -> (Child, mpsc::Receiver<String>) {
        let mut child = self
            .command(run, args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", self.name));
        let stderr = child.stderr.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        (child, lines)
    }

    /// The demo's exit, within `limit` (else it is killed, and the test fails).
    fn wait_exit(&self, child: &mut Child, limit: Duration) -> ExitStatus {
        let name = self.name;
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child
                .try_wait()
                .unwrap_or_else(|e| panic!("wait for {name}: {e}"))
            {
                return status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                panic!("{name} did not stop within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The phase called `name` in a pix-demo summary's `phases`.
pub fn phase<'a>(summary: &'a Value, name: &str) -> &'a Value {
    summary["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .find(|p| p["phase"] == name)
        .unwrap_or_else(|| panic!("no phase {name} in {summary}"))
}

pub fn int(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("{value} is not a count"))
}

pub fn secs(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("{value} is not a number"))
}

/// Everything printed until a line containing `needle` (bounded).
fn wait_for(lines: &mpsc::Receiver<String>, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
                if line.contains(needle) {
                    return seen;
                }
            }
            Err(_) => panic!("no {needle:?} within 60 s:\n{seen}"),
        }
    }
}

/// The private Redis the demo said it started (in `seen`, its stderr) no longer answers, and
/// no process whose command line mentions `needle` (the demo's `children`) is left.
pub fn assert_everything_stopped(seen: &str, children: &str, needle: &str) {
    let redis = between(seen, "on redis://", ",");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let redis_up = TcpStream::connect(redis).is_ok();
        let left = processes_with(needle);
        if !redis_up && left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still running 10 s later: redis at {redis} {}, {children} {left:?}\n{seen}",
            if redis_up { "answers" } else { "is gone" }
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The text of `text` between the first `before` and the next `after` (or the end).
pub fn between<'a>(text: &'a str, before: &str, after: &str) -> &'a str {
    let start = text
        .find(before)
        .unwrap_or_else(|| panic!("no {before:?} in:\n{text}"))
        + before.len();
    let rest = &text[start..];
    &rest[..rest.find(after).unwrap_or(rest.len())]
}

/// Pids of live processes whose command line mentions `needle`.
fn processes_with(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = state
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            !zombie && String::from_utf8_lossy(&cmdline).contains(needle)
        })
        .collect()
}

/// `kill -<name> <pid>`.
fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} {pid}");
}

//! The `throttle` binary against real servers (loopback, started by the test kit): `status`
//! finds a quota a real `FleetReport` reports and one by its pattern, and reads the server's
//! state of both; `pause` shows in the next `status`; a server with neither the module nor the
//! library fails with what to do, `load-library` fixes it, and the verbs then go through the
//! library; a key that is not a bucket, a wrong URL and a wrong argument exit 1, 1 and 2;
//! `watch --count 2` draws two cleared, titled tables. (`dashboard`: tests/dashboard.rs.)
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle-cli --test cli
//! ```

use std::process::{Command, Output};
use std::time::Duration;

use redis_throttle::prelude::*;
use redis_throttle::report::{report_key, Counter, FleetReport, Report};
use redis_throttle::{Limiter, LimiterBuilder, Quota, TryAcquire};
use serde_json::Value as Json;
use throttle_testkit::{Flavor, Server};
use tokio::time::Instant;

mod common;
use common::{connect, report_when, set_raw, started};

/// Bound on the wait for a report to land.
const BOUND: Duration = Duration::from_secs(10);

/// Runs `throttle --url URL ARGS...` (off the runtime's threads).
async fn throttle(url: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_throttle"));
    cmd.arg("--url").arg(url).args(args);
    tokio::task::spawn_blocking(move || cmd.output().expect("run throttle"))
        .await
        .unwrap()
}

/// Its stdout, after checking that it exited 0.
fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "throttle failed: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// Its stderr, after checking that it exited `code`.
fn failed(output: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    assert!(output.stdout.is_empty(), "{:?}", output.stdout);
    stderr
}

/// A process that reports every 100 ms, and the limiter `builder` makes reporting to it.
async fn reporting(
    url: &str,
    builder: LimiterBuilder,
) -> (FleetReport, Limiter<redis::aio::MultiplexedConnection>) {
    let fleet = FleetReport::every(connect(url).await, Duration::from_millis(100)).unwrap();
    let limiter = builder.report(&fleet).build(connect(url).await).unwrap();
    (fleet, limiter)
}

/// A reporting process (as [`reporting`]) whose limiter has been granted `calls` calls, and
/// its report once that counts them.
async fn reported(
    url: &str,
    con: &mut redis::aio::MultiplexedConnection,
    builder: LimiterBuilder,
    calls: u64,
) -> (
    FleetReport,
    Limiter<redis::aio::MultiplexedConnection>,
    Report,
) {
    let (fleet, limiter) = reporting(url, builder).await;
    for _ in 0..calls {
        limiter.acquire().await.unwrap();
    }
    let report = report_when(con, limiter.key(), fleet.process(), BOUND, |r| {
        r.total.get(Counter::Granted) == calls
    })
    .await;
    (fleet, limiter, report)
}

/// THROTTLE.TAKE of `key` with `words` after it (the quota and its options).
async fn take(con: &mut redis::aio::MultiplexedConnection, key: &str, words: &str) {
    let _: Vec<i64> = redis::cmd("THROTTLE.TAKE")
        .arg(key)
        .arg(words.split_whitespace().collect::<Vec<_>>())
        .query_async(con)
        .await
        .unwrap();
}

/// `status --json`'s row of `key`.
fn row<'a>(rows: &'a Json, key: &str) -> &'a Json {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no row {key} in {rows:#}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_a_reported_quota_and_one_found_by_its_pattern_and_a_pause() {
    let (_server, url, mut con) = started(Flavor::Redis82).await;

    // One quota used by a limiter that reports (a real FleetReport) ...
    let builder = Limiter::builder("quota:reported", Quota::new(10, 5u64).unwrap());
    let (_fleet, limiter, _) = reported(&url, &mut con, builder, 3).await;
    // ... one no process reports, and a string that is no bucket.
    take(&mut con, "quota:found", "100 0.5 TOKENS 40").await;
    set_raw(&mut con, b"quota:plain", b"hello").await;

    // Without --quota the pattern's unreported keys are only counted.
    let text = ok(&throttle(&url, &["status", "quota:*"]).await);
    assert!(text.starts_with("KEY "), "{text}");
    assert!(text.contains("\nquota:reported "), "{text}");
    assert!(!text.contains("quota:found"), "{text}");
    assert!(
        text.contains("2 key(s) match \"quota:*\" that no process reports: pass --quota"),
        "{text}"
    );

    let text = ok(&throttle(&url, &["status", "quota:*", "--quota", "100/0.5"]).await);
    assert!(text.contains("\nquota:found "), "{text}");
    assert!(
        text.contains("1 key(s) matching the pattern are not buckets: skipped"),
        "{text}"
    );

    let json = ok(&throttle(&url, &["status", "quota:*", "--quota", "100/0.5", "--json"]).await);
    let rows: Json = serde_json::from_str(&json).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 2, "{rows:#}");
    let reported = row(&rows, "quota:reported");
    assert_eq!(reported["found"], "report");
    assert_eq!(reported["capacity"], 10);
    assert_eq!(reported["rate"], "5");
    assert_eq!(reported["state"]["paused_ms"], 0);
    assert_eq!(reported["state"]["factor_bp"], 10_000);
    assert_eq!(reported["fleet"]["processes"], 1);
    assert_eq!(reported["problem"], Json::Null);
    let found = row(&rows, "quota:found");
    assert_eq!(found["found"], "pattern");
    assert_eq!(found["capacity"], 100);
    assert_eq!(found["rate"], "0.5");
    assert_eq!(found["fleet"], Json::Null);
    assert_eq!(found["state"]["paused_ms"], 0);
    // 60 left, refilling at 0.5/s: a few seconds at most have passed.
    let tokens = found["state"]["tokens"].as_u64().unwrap();
    assert!((60..=65).contains(&tokens), "{tokens}");

    // The quota of the pause is the reported one.
    let text = ok(&throttle(&url, &["pause", "quota:reported", "5s"]).await);
    assert!(
        text.starts_with(
            "quota:reported paused: no call before 5.000 s from now (server says 5000 ms"
        ),
        "{text}"
    );
    let rows: Json =
        serde_json::from_str(&ok(&throttle(&url, &["status", "--json"]).await)).unwrap();
    let paused = row(&rows, "quota:reported");
    let paused_ms = paused["state"]["paused_ms"].as_u64().unwrap();
    assert!((1..=5000).contains(&paused_ms), "{paused:#}");
    assert_eq!(paused["state"]["tokens"], 0);
    let text = ok(&throttle(&url, &["status"]).await);
    let line = text
        .lines()
        .find(|l| l.starts_with("quota:reported "))
        .unwrap();
    assert!(
        line.contains(" s "),
        "the pause is shown in seconds: {text}"
    );
    // Resumed: the pause is over at once, the tokens as they were (no refill); a second resume
    // has nothing to end.
    let text = ok(&throttle(&url, &["resume", "quota:reported"]).await);
    assert_eq!(
        text,
        "quota:reported resumed: no pause and no cut from now; its tokens and the slots held are \
         as they were (a resume never refills)\n"
    );
    let rows: Json =
        serde_json::from_str(&ok(&throttle(&url, &["status", "--json"]).await)).unwrap();
    let resumed = row(&rows, "quota:reported");
    assert_eq!(resumed["state"]["paused_ms"], 0, "{resumed:#}");
    assert_eq!(resumed["state"]["tokens"], 0, "{resumed:#}");
    let text = ok(&throttle(&url, &["resume", "quota:reported"]).await);
    assert_eq!(
        text,
        "quota:reported was neither paused nor cut: nothing to resume, nothing written\n"
    );

    // The tool's own user (client/cli/README.md, Permissions): enough for status and the
    // verbs, not for load-library, and its password never printed.
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("throttle-ops")
        .arg(OPS_ACL.split(' ').collect::<Vec<_>>())
        .query_async(&mut con)
        .await
        .unwrap();
    let ops_url = url.replacen("redis://", "redis://throttle-ops:secret@", 1);
    let text = ok(&throttle(&ops_url, &["status", "quota:*", "--quota", "100/0.5"]).await);
    assert!(
        text.contains("\nquota:reported ") && text.contains("\nquota:found "),
        "{text}"
    );
    ok(&throttle(&ops_url, &["sync", "quota:reported", "0", "0ms"]).await);
    ok(&throttle(&ops_url, &["resume", "quota:reported"]).await);
    assert!(
        !text.contains("cluster node"),
        "the user may ask CLUSTER NODES: {text}"
    );
    let text = ok(&throttle(&ops_url, &["check"]).await);
    assert!(
        text.contains(&format!(": module {}; ", module_version_text())),
        "{text}"
    );
    let stderr = failed(&throttle(&ops_url, &["load-library"]).await, 1);
    assert!(stderr.contains("+function|load"), "{stderr}");
    assert!(
        !stderr.contains("secret") && stderr.contains("throttle-ops:***@"),
        "{stderr}"
    );
    drop(limiter);
}

/// The ACL rules of the tool's user, as client/cli/README.md gives them.
const OPS_ACL: &str = "on >secret resetkeys ~quota:* ~throttle:report:* resetchannels -@all +scan +mget +get +command|info +function|list +cluster|nodes +module|list +throttle.peek +throttle.slots +throttle.pause +throttle.resume +throttle.quota +throttle.cut +throttle.sync +fcall_ro +fcall";

#[test]
fn the_readme_gives_the_tools_acl_line() {
    let readme = include_str!("../README.md");
    let line = format!("ACL SETUSER throttle-ops {OPS_ACL}");
    assert!(readme.lines().any(|l| l == line), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_module_the_library_serves_once_loaded() {
    let server = Server::builder(Flavor::Redis82).module(false).start();
    let url = server.url();

    let stderr = failed(&throttle(&url, &["status"]).await, 1);
    assert!(
        stderr.contains("neither the THROTTLE module nor the throttle function library")
            && stderr.contains("throttle load-library"),
        "{stderr}"
    );

    let text = ok(&throttle(&url, &["load-library"]).await);
    let version = redis_throttle::script::LIBRARY_VERSION;
    assert!(
        text.ends_with(&format!("before none; now version {version}\n")),
        "{text}"
    );
    let text = ok(&throttle(&url, &["load-library"]).await);
    assert!(
        text.contains(&format!(
            "before version {version}, this client's, byte for byte"
        )),
        "{text}"
    );

    let text = ok(&throttle(&url, &["pause", "quota:lib", "2s", "--quota", "4/2"]).await);
    assert!(
        text.starts_with("quota:lib paused: no call before 2.000 s"),
        "{text}"
    );
    let json = ok(&throttle(&url, &["status", "quota:*", "--quota", "4/2", "--json"]).await);
    let rows: Json = serde_json::from_str(&json).unwrap();
    let lib = row(&rows, "quota:lib");
    assert!(lib["state"]["paused_ms"].as_u64().unwrap() > 0, "{lib:#}");
    assert_eq!(lib["capacity"], 4);
    // The slot table, through the library's FCALL_RO throttle_slots.
    let mut con = connect(&url).await;
    let _: Vec<i64> = redis::cmd("FCALL")
        .arg("throttle_take")
        .arg(1)
        .arg("quota:slots")
        .arg(4)
        .arg(2)
        .arg("INFLIGHT")
        .arg(2)
        .arg("LEASE")
        .arg(60_000)
        .query_async(&mut con)
        .await
        .unwrap();
    let json = ok(&throttle(&url, &["status", "quota:*", "--quota", "4/2", "--json"]).await);
    let rows: Json = serde_json::from_str(&json).unwrap();
    assert_eq!(row(&rows, "quota:slots")["slots"]["held"], 1, "{rows:#}");
    assert_eq!(row(&rows, "quota:lib")["slots"]["held"], 0, "{rows:#}");
    // A resume through the library (FCALL throttle_resume) keeps the slot held.
    ok(&throttle(&url, &["pause", "quota:slots", "30s", "--quota", "4/2"]).await);
    let text = ok(&throttle(&url, &["resume", "quota:slots", "--quota", "4/2"]).await);
    assert!(text.starts_with("quota:slots resumed: "), "{text}");
    let json = ok(&throttle(&url, &["status", "quota:*", "--quota", "4/2", "--json"]).await);
    let rows: Json = serde_json::from_str(&json).unwrap();
    assert_eq!(row(&rows, "quota:slots")["slots"]["held"], 1, "{rows:#}");
    assert_eq!(
        row(&rows, "quota:slots")["state"]["paused_ms"],
        0,
        "{rows:#}"
    );

    let text = ok(&throttle(&url, &["cut", "quota:cut", "0.5", "60s", "--quota", "4/2"]).await);
    assert!(
        text.starts_with(
            "quota:cut cut: the rate is x0.50 now (5000 bp), back to the full rate in 60.000 s"
        ),
        "{text}"
    );
    let text = ok(&throttle(&url, &["sync", "quota:sync", "1", "0ms", "--quota", "4/2"]).await);
    assert!(
        text.starts_with("quota:sync lowered: 1 token(s) now"),
        "{text}"
    );

    // A key that is not a bucket.
    let mut con = connect(&url).await;
    set_raw(&mut con, b"quota:plain", b"hello").await;
    let stderr = failed(
        &throttle(&url, &["pause", "quota:plain", "1s", "--quota", "4/2"]).await,
        1,
    );
    assert!(
        stderr.contains("\"quota:plain\" is not a THROTTLE bucket"),
        "{stderr}"
    );
    // And one whose quota no one reports.
    let stderr = failed(&throttle(&url, &["pause", "quota:lib", "1s"]).await, 1);
    assert!(stderr.contains("pass --quota CAPACITY/RATE"), "{stderr}");
}

#[tokio::test]
async fn a_wrong_url_exits_1_and_names_it_and_a_wrong_argument_exits_2() {
    // A loopback port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("redis://127.0.0.1:{port}");
    let stderr = failed(&throttle(&url, &["status"]).await, 1);
    assert!(
        stderr.starts_with(&format!("throttle: cannot connect to {url}: ")),
        "{stderr}"
    );
    let stderr = failed(&throttle("not a url", &["status"]).await, 1);
    assert!(stderr.contains("is not a Redis URL"), "{stderr}");
    let stderr = failed(&throttle(&url, &["status", "--bogus"]).await, 2);
    assert!(stderr.contains("--bogus"), "{stderr}");
    let stderr = failed(&throttle(&url, &["pause", "k", "2x"]).await, 2);
    assert!(stderr.contains("is not a duration"), "{stderr}");
}

#[test]
fn acl_prints_the_documented_lines_with_the_keys_given() {
    let output = Command::new(env!("CARGO_BIN_EXE_throttle"))
        .args(["acl", "library", "--keys", "quota:payments:*"])
        .output()
        .unwrap();
    let text = ok(&output);
    assert!(text.contains(
        "ACL SETUSER throttle-admin on >secret resetkeys resetchannels -@all +function|load +function|list\n"
    ));
    assert!(text.contains("ACL SETUSER throttle-ro on >secret resetkeys ~quota:payments:* "));
    // The fleet's channels are its keys' alone, not every fleet's (throttle:pause:*).
    assert!(text.contains(
        "ACL SETUSER throttle-rw on >secret resetkeys ~quota:payments:* resetchannels \
         &throttle:pause:{quota:payments:*} &throttle:pause:quota:payments:* -@all +fcall "
    ));
    assert!(!text.contains("throttle:pause:*"), "{text}");
    let output = Command::new(env!("CARGO_BIN_EXE_throttle"))
        .args(["acl", "module", "--keys", "quota:a:* ~*"])
        .output()
        .unwrap();
    let stderr = failed(&output, 1);
    assert_eq!(
        stderr,
        "throttle: --keys \"quota:a:* ~*\" is not one ACL key pattern: give one pattern \
         without spaces, like quota:payments:*\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_draws_the_table_count_times() {
    let (_server, url, mut con) = started(Flavor::Redis70).await;
    take(&mut con, "quota:watched", "10 5 TOKENS 4").await;

    let text = ok(&throttle(
        &url,
        &[
            "watch", "quota:*", "--quota", "10/5", "--every", "200ms", "--count", "2",
        ],
    )
    .await);
    // Two frames, each cleared, titled, then the table with the key found by its pattern.
    let frames: Vec<&str> = text.split("\x1b[H\x1b[2J").collect();
    assert_eq!(frames.len(), 3, "{text:?}");
    assert!(frames[0].is_empty(), "{text:?}");
    for frame in &frames[1..] {
        assert!(
            frame.starts_with(&format!(
                "throttle status quota:* on {url}, every 0.200 s: "
            )),
            "{frame}"
        );
        assert!(frame.contains(" UTC\n\nKEY "), "{frame}");
        assert!(frame.contains("\nquota:watched "), "{frame}");
    }

    let stderr = failed(&throttle(&url, &["watch", "--every", "10ms"]).await, 1);
    assert!(stderr.contains("at least 100ms"), "{stderr}");
}

/// Each incident verb moves a running fleet: `pause` holds back a call another process has
/// reserved and is asleep for (heard on the announcements, not asked), `cut` slows the next
/// calls to the cut rate, and `sync` with nothing left stops them until the supplier's reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_verb_moves_a_running_fleet() {
    use redis_throttle::{Announcements, TryAcquire};
    let server = Server::builder(Flavor::Redis82).start();
    let url = server.url();
    let announcements = Announcements::new(redis::Client::open(url.as_str()).unwrap()).unwrap();
    // One token every 2 s: a second call reserves and sleeps 2 s.
    let limiter = Limiter::builder("quota:fleet", Quota::new(1, "0.5").unwrap())
        .listen(&announcements)
        .build(connect(&url).await)
        .unwrap();
    assert!(
        announcements.ready(BOUND).await,
        "subscribed to the bucket's channel"
    );
    let quota = ["--quota", "1/0.5"];

    limiter.acquire().await.unwrap();
    let start = Instant::now();
    let reserved = tokio::spawn({
        let limiter = limiter.clone();
        async move { limiter.acquire().await.unwrap() }
    });
    // Sent once the call has reserved (its round trip back), while it sleeps.
    let deadline = Instant::now() + BOUND;
    while limiter.metrics().round_trips < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let paused_at = start.elapsed();
    assert!(
        paused_at < Duration::from_millis(1500),
        "reserved {paused_at:?} after the start: no sleep left to pause (a loaded machine?)"
    );
    let said = ok(&throttle(
        &url,
        &[&["pause", "quota:fleet", "3s"], &quota[..]].concat(),
    )
    .await);
    assert!(
        said.starts_with("quota:fleet paused: no call before ") && said.contains("asked 3000 ms"),
        "{said}"
    );
    reserved.await.unwrap();
    let pushback = limiter.metrics().pushback;
    assert_eq!(
        (
            pushback.heard_pauses,
            pushback.held_by_pause,
            pushback.pause_checks
        ),
        (1, 1, 0),
        "the reserved call heard the pause and was held back by it"
    );
    assert!(
        start.elapsed() >= paused_at + Duration::from_secs(3),
        "granted {:?} after the start, inside the pause sent at {paused_at:?}",
        start.elapsed()
    );

    // Cut to half the rate, climbing back over 10 s: the limiter sees the factor (at most a
    // tenth of the way back within the second this may take on a busy machine).
    let said = ok(&throttle(
        &url,
        &[&["cut", "quota:fleet", "0.5", "10s"], &quota[..]].concat(),
    )
    .await);
    assert!(
        said.starts_with("quota:fleet cut: the rate is x0.50 now"),
        "{said}"
    );
    let state = limiter.peek().await.unwrap();
    assert!(
        (5000..6000).contains(&state.factor_bp),
        "the fleet's rate is cut: {state:?}"
    );

    // The supplier says nothing is left until its reset in 2 s: no call before then.
    let said = ok(&throttle(
        &url,
        &[&["sync", "quota:fleet", "0", "2s"], &quota[..]].concat(),
    )
    .await);
    assert!(
        said.starts_with(
            "quota:fleet emptied and paused until the supplier's reset: no call before 2.000 s"
        ),
        "{said}"
    );
    match limiter.try_acquire().await.unwrap() {
        TryAcquire::Denied { retry_after } => assert!(
            retry_after >= Duration::from_millis(1900),
            "held until the supplier's reset: {retry_after:?}"
        ),
        TryAcquire::Granted(grant) => panic!("granted inside the supplier's reset: {grant:?}"),
    }
}

/// Issue 42: a pause at least as long as the `max_wait` a reporting process says its calls
/// wait at most would fail them all with DeadlineExceeded: `pause` (and `cut`, whose pause is
/// the same) refuses it, saying so, unless `--force`; a shorter pause goes through silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_longer_than_the_fleets_deadline_needs_force() {
    let (_server, url, mut con) = started(Flavor::Redis82).await;
    // A real process that reports its limiter, whose calls wait at most 60 s.
    let builder = Limiter::builder("quota:deadline", Quota::new(10, 5u64).unwrap())
        .max_wait(Duration::from_secs(60));
    let (_fleet, limiter, report) = reported(&url, &mut con, builder, 1).await;
    assert_eq!(report.max_wait_ms, Some(60_000), "{report:?}");

    let refused = "throttle: 1 process on quota:deadline waits at most 60s for a call (max_wait): \
its calls will fail with DeadlineExceeded during this 90s pause (every call while more than 60s \
of it is left); add --force to pause anyway\n";
    let stderr = failed(
        &throttle(&url, &["pause", "quota:deadline", "90s"]).await,
        1,
    );
    assert_eq!(stderr, refused);
    // As long as the deadline is as bad: the first calls ask for a wait past it.
    let stderr = failed(&throttle(&url, &["pause", "quota:deadline", "1m"]).await, 1);
    assert!(stderr.contains("during this 60s pause"), "{stderr}");
    let stderr = failed(
        &throttle(
            &url,
            &["cut", "quota:deadline", "0.5", "60s", "--pause", "2m"],
        )
        .await,
        1,
    );
    assert!(
        stderr.ends_with("during this 120s pause (every call while more than 60s of it is left); add --force to cut anyway\n"),
        "{stderr}"
    );
    let peek: Vec<i64> = redis::cmd("THROTTLE.PEEK")
        .arg("quota:deadline")
        .arg(10)
        .arg(5)
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(peek[4], 0, "refused, so not paused: {peek:?}");

    // Shorter than the deadline: paused, saying nothing of it.
    let output = throttle(&url, &["pause", "quota:deadline", "5s"]).await;
    let text = ok(&output);
    assert!(
        text.starts_with("quota:deadline paused: no call before 5.000 s"),
        "{text}"
    );
    assert!(output.stderr.is_empty(), "{:?}", output.stderr);
    // Forced: paused.
    let text = ok(&throttle(&url, &["pause", "quota:deadline", "90s", "--force"]).await);
    assert!(
        text.starts_with("quota:deadline paused: no call before 90.000 s"),
        "{text}"
    );
    drop(limiter);
}

/// `quota KEY C/R` keeps a quota at the server that the fleet's calls take at, `status` shows it
/// as the key's (and what the processes send), the same quota again writes nothing, and
/// `--clear` gives the key back to the processes' quota, reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quota_kept_at_the_server_is_shown_and_cleared() {
    let (_server, url, mut con) = started(Flavor::Redis82).await;
    let builder = Limiter::builder("quota:kept", Quota::new(10, 10u64).unwrap());
    let (_fleet, limiter, _) = reported(&url, &mut con, builder, 1).await;

    let text = ok(&throttle(&url, &["quota", "quota:kept", "20/20"]).await);
    assert!(
        text.starts_with(
            "quota:kept: quota 20/20 kept at the server: every process on it takes at 20 per \
             second with bursts of 20 from its next call, whatever its own quota; the bucket \
             holds "
        ) && text.ends_with("(clear it with throttle quota quota:kept --clear)\n"),
        "{text}"
    );
    // The fleet's next calls take at the kept quota: a burst of 20, where its own holds 10.
    let mut granted = 0;
    while matches!(limiter.try_acquire().await.unwrap(), TryAcquire::Granted(_)) {
        granted += 1;
        assert!(granted <= 20, "more than the kept burst");
    }
    assert!((18..=20).contains(&granted), "{granted}");
    let pttl: i64 = redis::cmd("PTTL")
        .arg("quota:kept")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(pttl, -1, "no TTL while a quota is kept");

    let json = ok(&throttle(&url, &["status", "--json"]).await);
    let rows: Json = serde_json::from_str(&json).unwrap();
    let kept = row(&rows, "quota:kept");
    assert_eq!(kept["quota_from"], "server", "{kept:#}");
    assert_eq!(
        (&kept["capacity"], &kept["rate"]),
        (&Json::from(20), &Json::from("20"))
    );
    assert_eq!(kept["note"], "the processes send 10/10", "{kept:#}");

    let again = ok(&throttle(&url, &["quota", "quota:kept", "20/20"]).await);
    assert!(
        again.starts_with("quota:kept already keeps the quota 20/20: nothing written; "),
        "{again}"
    );
    let cleared = ok(&throttle(&url, &["quota", "quota:kept", "--clear"]).await);
    assert!(
        cleared.starts_with(
            "quota:kept: no quota kept at the server: each process takes at its own quota \
             from its next call; the bucket holds "
        ) && cleared.ends_with(" at 10/10\n"),
        "{cleared}"
    );
    let json = ok(&throttle(&url, &["status", "--json"]).await);
    let rows: Json = serde_json::from_str(&json).unwrap();
    let row = row(&rows, "quota:kept");
    assert_eq!(
        (row["quota_from"].as_str(), row["capacity"].as_u64()),
        (Some("report"), Some(10))
    );
    let stderr = failed(&throttle(&url, &["quota", "quota:kept"]).await, 1);
    assert_eq!(
        stderr,
        "throttle: give the quota to keep for \"quota:kept\", like `throttle quota quota:kept \
         20/20`, or --clear to give the key back to its callers' quotas\n"
    );
    let stderr = failed(
        &throttle(&url, &["quota", "quota:unreported", "--clear"]).await,
        1,
    );
    assert_eq!(
        stderr,
        "throttle: no process reports \"quota:unreported\", so the quota its callers send is \
         unknown: give it, like `throttle quota quota:unreported 10/10 --clear`\n"
    );
    let none = ok(&throttle(&url, &["quota", "quota:kept", "--clear"]).await);
    assert_eq!(
        none,
        "quota:kept keeps no quota at the server: nothing to clear, nothing written\n"
    );
}

/// A report line of `key` with the given fields (`rate=5` unless they name one).
fn report_line(key: &str, fields: &str) -> String {
    let mut line = "v1 at=1 period=1000 process=p capacity=10".to_owned();
    if !fields.contains("rate=") {
        line.push_str(" rate=5");
    }
    if !fields.is_empty() {
        line.push(' ');
        line.push_str(fields);
    }
    format!("{line} key={key}")
}

/// M3: a report whose bytes are not UTF-8 (in its key, or all of it) is read lossy or named on
/// a line of its own; `status`, `watch` and `status --json` still show every other quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_that_is_not_utf8_stops_no_other_quota() {
    let (_server, url, mut con) = started(Flavor::Redis70).await;
    let good = report_line("quota:good", "");
    set_raw(&mut con, b"throttle:report:{quota:good}:p", good.as_bytes()).await;
    let mut bad = report_line("quota:bad", "").into_bytes();
    bad.extend_from_slice(b"\xff\xfe");
    set_raw(&mut con, b"throttle:report:{quota:bad\xff\xfe}:p", &bad).await;
    set_raw(&mut con, b"throttle:report:{junk}:p", b"\xff\xfe\x00 junk").await;

    let text = ok(&throttle(&url, &["status"]).await);
    let expected = "\
KEY          CAPACITY  RATE/S  TOKENS  PAUSED  CUT  FULL IN  PROCS  GRANTS/S  WAIT P50  WAIT P99  429s  IN FLIGHT
quota:bad\u{fffd}\u{fffd}        10       5       ?       ?    ?        ?      1       0.0         -         -     0          -
quota:good         10       5      10       -    -     full      1       0.0         -         -     0          -
quota:bad\u{fffd}\u{fffd}: the reported key is not UTF-8 (shown with U+FFFD in place of its bad bytes): its bucket is not read
throttle:report:{junk}:p: not a report line (8 bytes): skipped
";
    assert_eq!(text, expected, "\n{text}");

    let text = ok(&throttle(&url, &["watch", "--count", "1"]).await);
    assert!(text.contains("\nquota:good "), "{text}");
    assert!(
        text.contains("\nthrottle:report:{junk}:p: not a report line"),
        "{text}"
    );

    let output = throttle(&url, &["status", "--json"]).await;
    let rows: Json = serde_json::from_str(&ok(&output)).unwrap();
    assert_eq!(row(&rows, "quota:good")["state"]["tokens"], 10);
    assert_eq!(row(&rows, "quota:bad\u{fffd}\u{fffd}")["state"], Json::Null);
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "throttle: throttle:report:{junk}:p: not a report line (8 bytes): skipped\n"
    );
}

/// M4 and L6: a report key of 70 000 characters neither panics `status` nor `watch` nor widens
/// every row: the table cuts it at 60 characters with an ellipsis; `--json` has it whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_70000_characters_is_cut_in_the_table_and_whole_in_json() {
    let (_server, url, mut con) = started(Flavor::Redis70).await;
    let long = format!("quota:{}", "k".repeat(70_000));
    let line = report_line(&long, "");
    set_raw(&mut con, report_key(&long, "p").as_bytes(), line.as_bytes()).await;
    for i in 0..100 {
        let key = format!("quota:short:{i:03}");
        let line = report_line(&key, "");
        set_raw(&mut con, report_key(&key, "p").as_bytes(), line.as_bytes()).await;
    }

    let text = ok(&throttle(&url, &["status"]).await);
    let shown = format!("quota:{}…", "k".repeat(53));
    assert_eq!(shown.chars().count(), 60);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 102, "{text}");
    assert_eq!(
        lines[1],
        format!("{shown}        10       5      10       -    -     full      1       0.0         -         -     0          -")
    );
    assert_eq!(
        lines[2],
        "quota:short:000                                                     10       5      10       -    -     full      1       0.0         -         -     0          -"
    );
    // Every line as wide as the header, whatever the key.
    assert!(
        lines
            .iter()
            .all(|l| l.chars().count() <= lines[0].chars().count()),
        "{text}"
    );

    let text = ok(&throttle(&url, &["watch", "--count", "1"]).await);
    assert!(text.contains(&format!("\n{shown}  ")), "{text}");
    assert!(text.len() < 20_000, "{} bytes", text.len());

    let rows: Json =
        serde_json::from_str(&ok(&throttle(&url, &["status", "--json"]).await)).unwrap();
    assert_eq!(row(&rows, &long)["key"].as_str().unwrap().len(), long.len());
}

/// M5: report keys and rates are shown escaped: an escape sequence (clear the screen, set the
/// title) is printed as text, a newline in a key cannot forge a row; `--json` has them whole,
/// as JSON escapes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_sequences_and_newlines_in_reports_are_printed_as_text() {
    let (_server, url, mut con) = started(Flavor::Redis70).await;
    let title = "quota:\x1b]0;owned\x07\x1b[2J";
    let forged = "quota:a\nquota:forged        10       5      10";
    let rate = "5\x1b[31m";
    for (key, fields) in [
        (title, String::new()),
        (forged, String::new()),
        ("quota:red", format!("rate={rate}")),
    ] {
        let line = report_line(key, &fields);
        set_raw(&mut con, report_key(key, "p").as_bytes(), line.as_bytes()).await;
    }

    let text = ok(&throttle(&url, &["status"]).await);
    assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
    let expected = "\
KEY                                              CAPACITY     RATE/S  TOKENS  PAUSED  CUT  FULL IN  PROCS  GRANTS/S  WAIT P50  WAIT P99  429s  IN FLIGHT
quota:\\x1b]0;owned\\x07\\x1b[2J                          10          5      10       -    -     full      1       0.0         -         -     0          -
quota:a\\nquota:forged        10       5      10        10          5      10       -    -     full      1       0.0         -         -     0          -
quota:red                                              10  5\\x1b[31m       ?       ?    ?        ?      1       0.0         -         -     0          -
quota:red: ERR rate must be a decimal number of tokens per second from 0.000001 to 1000000000, like 10 or 0.5
";
    assert_eq!(text, expected, "\n{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        !lines.iter().any(|l| l.starts_with("quota:forged")),
        "{text}"
    );

    // `watch` clears the screen itself, once per frame, and prints no other escape.
    let text = ok(&throttle(&url, &["watch", "--count", "1"]).await);
    assert_eq!(text.matches('\x1b').count(), 2, "{text:?}");
    assert!(text.starts_with("\x1b[H\x1b[2J"), "{text:?}");

    let json = ok(&throttle(&url, &["status", "--json"]).await);
    assert!(!json.contains('\x1b'), "{json:?}");
    assert!(
        json.contains("\"key\": \"quota:\\u001b]0;owned\\u0007\\u001b[2J\""),
        "{json}"
    );
    let rows: Json = serde_json::from_str(&json).unwrap();
    assert_eq!(row(&rows, title)["key"], title);
    assert_eq!(row(&rows, forged)["key"], forged);
    assert_eq!(row(&rows, "quota:red")["rate"], rate);
}

/// L5: the fleet's counters saturate: two reports of u64::MAX sum to u64::MAX, not to
/// u64::MAX - 1 (nor a panic).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleets_sums_saturate() {
    let (_server, url, mut con) = started(Flavor::Redis70).await;
    let max = u64::MAX;
    let fields = format!(
        "in_flight={max} max_in_flight=4 leases_lost={max} p.r429={max} p.held_pause={max} \
         p.slot_waits={max}"
    );
    for process in ["p1", "p2"] {
        let line =
            report_line("quota:sum", &fields).replace("process=p ", &format!("process={process} "));
        set_raw(
            &mut con,
            report_key("quota:sum", process).as_bytes(),
            line.as_bytes(),
        )
        .await;
    }
    let rows: Json =
        serde_json::from_str(&ok(&throttle(&url, &["status", "--json"]).await)).unwrap();
    let fleet = &row(&rows, "quota:sum")["fleet"];
    assert_eq!(fleet["processes"], 2);
    for field in [
        "responses_429",
        "held_by_pause",
        "slot_waits",
        "leases_lost",
        "in_flight",
    ] {
        assert_eq!(fleet[field], max, "{field}: {fleet:#}");
    }
    // The server holds none of the slots reported: its count, the sum beside it.
    let text = ok(&throttle(&url, &["status"]).await);
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .ends_with(&format!("  {max}  0/4 (reported {max})")),
        "{text}"
    );
}

/// Issue 42: IN FLIGHT is the server's slot table (THROTTLE.SLOTS), with what the processes
/// report beside it when it differs: slots taken by a client that does not report (a worker
/// in another language on the same key) show, on a reported quota and on one found by its
/// pattern alone; `--json` has both, as separate fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_taken_by_a_client_that_does_not_report_show_in_status() {
    let (_server, url, mut con) = started(Flavor::Redis82).await;

    // A reporting process holds one call open under a cap of 4 ...
    let (fleet, limiter) = reporting(
        &url,
        Limiter::builder("quota:flight", Quota::new(10, 5u64).unwrap()).max_in_flight(4),
    )
    .await;
    let open_call = limiter.acquire().await.unwrap();
    // ... and a client that does not report takes two more slots there, one on another key.
    let take = |key: &str| {
        let mut cmd = redis::cmd("THROTTLE.TAKE");
        cmd.arg(key)
            .arg(10)
            .arg(5)
            .arg("INFLIGHT")
            .arg(4)
            .arg("LEASE")
            .arg(60_000);
        cmd
    };
    for key in ["quota:flight", "quota:flight", "quota:python"] {
        let reply: Vec<i64> = take(key).query_async(&mut con).await.unwrap();
        assert_eq!(reply.first(), Some(&1), "{key}: {reply:?}");
    }
    report_when(&mut con, "quota:flight", fleet.process(), BOUND, |r| {
        r.in_flight == 1 && r.max_in_flight == 4
    })
    .await;

    let text = ok(&throttle(&url, &["status", "quota:*", "--quota", "10/5"]).await);
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{key} ")))
            .unwrap_or_else(|| panic!("no {key} in\n{text}"))
            .to_owned()
    };
    assert!(
        line("quota:flight").ends_with("  3/4 (reported 1)"),
        "{text}"
    );
    let last_two: Vec<String> = line("quota:python")
        .split_whitespace()
        .rev()
        .take(2)
        .map(str::to_owned)
        .collect();
    assert_eq!(last_two, ["1", "-"], "no report, one slot held:\n{text}");

    let json = ok(&throttle(&url, &["status", "quota:*", "--quota", "10/5", "--json"]).await);
    let rows: Json = serde_json::from_str(&json).unwrap();
    let flight = row(&rows, "quota:flight");
    assert_eq!(flight["slots"]["held"], 3, "{flight:#}");
    let lease = flight["slots"]["first_lease_ms"].as_u64().unwrap();
    assert!((1..=60_000).contains(&lease), "{flight:#}");
    assert_eq!(flight["fleet"]["in_flight"], 1, "{flight:#}");
    assert_eq!(flight["fleet"]["max_in_flight"], 4, "{flight:#}");
    let python = row(&rows, "quota:python");
    assert_eq!(python["slots"]["held"], 1, "{python:#}");
    assert_eq!(python["fleet"], Json::Null, "{python:#}");
    drop(open_call);
    drop(limiter);
}

/// The module crate's version as `check` prints it: `0.1.0 (ver 100)`, from its manifest.
fn module_version_text() -> String {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../module/Cargo.toml");
    let text = std::fs::read_to_string(manifest).unwrap();
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap();
    let parts: Vec<u64> = version.split('.').map(|p| p.parse().unwrap()).collect();
    let ver = parts[0] * 10_000 + parts[1] * 100 + parts[2];
    format!("{version} (ver {ver})")
}

/// Issue 42: `check` says per node what it has loaded, the module's build and the library's
/// version; a server with neither exits 1 and says what to do; loading the library fixes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_says_which_module_and_library_a_server_has() {
    let version = redis_throttle::script::LIBRARY_VERSION;
    let with = Server::builder(Flavor::Redis82).start();
    let url = with.url();
    let text = ok(&throttle(&url, &["check"]).await);
    assert_eq!(
        text,
        format!(
            "{url}: module {}; no function library\n",
            module_version_text()
        )
    );
    ok(&throttle(&url, &["load-library"]).await);
    let text = ok(&throttle(&url, &["check"]).await);
    assert_eq!(
        text,
        format!(
            "{url}: module {}; function library version {version} (this client's)\n",
            module_version_text()
        )
    );

    let without = Server::builder(Flavor::Valkey91).module(false).start();
    let url = without.url();
    let stderr = failed(&throttle(&url, &["check"]).await, 1);
    assert_eq!(
        stderr,
        format!(
            "throttle: 1 of 1 node(s) have neither the THROTTLE module nor the throttle \
             function library, or could not be read: load the module (redis-server \
             --loadmodule /path/to/libredis_throttle_module.so) or the library (throttle \
             load-library, against each primary)\n{url}: no module; no function library\n"
        )
    );
    ok(&throttle(&url, &["load-library"]).await);
    let text = ok(&throttle(&url, &["check"]).await);
    assert_eq!(
        text,
        format!("{url}: no module; function library version {version} (this client's)\n")
    );
    // Someone else's code under the library's name.
    let mut con = connect(&url).await;
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(
            "#!lua name=throttle\nlocal VERSION = 3 \
             \nredis.register_function('throttle_version', function() return VERSION end)",
        )
        .query_async(&mut con)
        .await
        .unwrap();
    let text = ok(&throttle(&url, &["check"]).await);
    assert_eq!(
        text,
        format!(
            "{url}: no module; function library version 3 (not this client's, version \
             {version}: the client does not use it; throttle load-library replaces it)\n"
        )
    );
}

/// Against a cluster of 3 masters, `check` has a line per master, `status` and `watch` list
/// the buckets of every master (SCAN on each), each row in `--json` with its node, and a verb
/// sent to one master acts on a key another serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_check_and_status_read_every_master() {
    let masters = tokio::task::spawn_blocking(|| {
        throttle_testkit::ReplicatedCluster::start(Flavor::Redis82, 3, 0).into_masters()
    })
    .await
    .unwrap();
    // One bucket on each master: the first key whose slot it serves.
    let mut keys = Vec::new();
    for master in &masters {
        let mut con = connect(&master.server.url()).await;
        let key = (0..10_000)
            .map(|i| format!("quota:c{i}"))
            .find(|key| {
                let slot = key_slot(key);
                master.node.owns(slot)
            })
            .unwrap();
        take(&mut con, &key, "10 5 TOKENS 4").await;
        keys.push((key, format!("127.0.0.1:{}", master.server.port())));
    }
    let url = masters[1].server.url();

    let text = ok(&throttle(&url, &["check"]).await);
    let mut expected: Vec<String> = masters
        .iter()
        .map(|m| {
            format!(
                "127.0.0.1:{}: module {}; no function library",
                m.server.port(),
                module_version_text()
            )
        })
        .collect();
    expected.sort();
    assert_eq!(text, expected.join("\n") + "\n");

    let json = ok(&throttle(&url, &["status", "quota:*", "--quota", "10/5", "--json"]).await);
    let rows: Json = serde_json::from_str(&json).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 3, "{rows:#}");
    for (key, node) in &keys {
        let found = row(&rows, key);
        assert_eq!(found["node"], node.as_str(), "{found:#}");
        let tokens = found["state"]["tokens"].as_u64().unwrap();
        assert!((6..=10).contains(&tokens), "{found:#}");
    }
    let text = ok(&throttle(&url, &["status", "quota:*", "--quota", "10/5"]).await);
    for (key, _) in &keys {
        assert!(text.contains(&format!("\n{key} ")), "{text}");
    }
    let text = ok(&throttle(
        &url,
        &["watch", "quota:*", "--quota", "10/5", "--count", "1"],
    )
    .await);
    for (key, _) in &keys {
        assert!(text.contains(&format!("\n{key} ")), "{text}");
    }

    // A verb sent through masters[1] reaches the master that serves its key.
    let (key, _) = &keys[0];
    let text = ok(&throttle(&url, &["pause", key, "20s", "--quota", "10/5"]).await);
    assert!(text.starts_with(&format!("{key} paused: ")), "{text}");
    let mut owner = connect(&masters[0].server.url()).await;
    let mut paused_ms = async || {
        let peek: Vec<i64> = redis::cmd("THROTTLE.PEEK")
            .arg(key)
            .arg(10)
            .arg(5)
            .query_async(&mut owner)
            .await
            .unwrap();
        peek[4]
    };
    let left = paused_ms().await;
    assert!((19_000..=20_000).contains(&left), "{left}");
    let text = ok(&throttle(&url, &["resume", key, "--quota", "10/5"]).await);
    assert_eq!(
        text,
        format!("{key} resumed: no pause and no cut from now; its tokens and the slots held are as they were (a resume never refills)\n")
    );
    assert_eq!(paused_ms().await, 0);
}

/// The cluster hash slot of `key`, as the server computes it.
fn key_slot(key: &str) -> u16 {
    redis_throttle::throttle_bucket::key_slot(key.as_bytes())
}

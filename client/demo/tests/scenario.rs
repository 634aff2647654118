//! The PIX-status scenario against real processes: a private Redis with the module (the
//! module must be built: `cargo build -p redis-throttle-module`), the mock API, and the
//! replicas as separate processes, through the `pix-demo` binary and its `--json` summary.
//!
//! The runs take turns (`turn`): the full-size one times the bucket to the millisecond, and
//! two cores shared with parallel runs would make that a test of the scheduler.

use std::time::Duration;

#[path = "../../demo-support/tests/scenario_tests/mod.rs"]
#[macro_use]
mod scenario_tests;

use scenario_tests::{assert_everything_stopped, between, int, phase, secs, turn, Demo};
use serde_json::Value;

const PIX_DEMO: Demo = demo_binary!("pix-demo", Duration::from_secs(120));

#[test]
fn full_size_direct_is_refused_and_the_bucket_is_served_on_time() {
    let _turn = turn();
    let summary = PIX_DEMO.run("full-size", &[]);
    assert_eq!(int(&summary["calls"]), 40);

    let direct = phase(&summary, "direct");
    assert_direct_is_refused_as_the_arrivals_allow(direct, Upstream::Bucket);

    let bucket = phase(&summary, "bucket");
    assert_served_on_time(bucket, RoundTrips::Listening);
    // A private server has the module, and auto found it.
    assert_eq!(summary["module_loaded"], true, "{summary}");
    assert_eq!(summary["backend"], "module", "{summary}");
    assert_eq!(bucket["backend"], "module", "{bucket}");

    let chart = std::fs::read_to_string(PIX_DEMO.chart_path("full-size")).expect("the chart");
    assert!(chart.starts_with("<svg") && chart.trim_end().ends_with("</svg>"));
    assert_eq!(
        summary["chart"],
        PIX_DEMO.chart_path("full-size").display().to_string()
    );
}

/// How a replica learns of a pause another replica set (`--no-listen`).
#[derive(Clone, Copy, Debug)]
enum RoundTrips {
    /// It hears the announcement: one round trip per call and nothing more.
    Listening,
    /// It asks: one PEEK after the sleep of each call that slept.
    Asking,
}

/// Phase 2 at full size: 40 served, none refused, the round trips `how` costs, and the last
/// call no earlier than the ideal 3.556 s and late only by the machine's measured doing.
#[track_caller]
fn assert_served_on_time(bucket: &Value, how: RoundTrips) {
    assert_eq!(int(&bucket["served"]), 40, "{bucket}");
    assert_eq!(int(&bucket["refused"]), 0, "{bucket}");
    assert_eq!(int(&bucket["errors"]), 0, "{bucket}");
    assert_eq!(int(&bucket["unserved"]), 0, "{bucket}");
    assert_eq!(
        (int(&bucket["pauses"]), int(&bucket["retries"])),
        (0, 0),
        "nothing to obey: {bucket}"
    );
    // Reserve: one round trip per call. A replica that listens hears of a pause another
    // replica set meanwhile; one that asks sends a PEEK after the sleep for each of the 32
    // that slept (8 were granted at once).
    let expected = match how {
        RoundTrips::Listening => 40,
        RoundTrips::Asking => 8 + 32 * 2,
    };
    assert_eq!(
        int(&bucket["round_trips"]),
        expected,
        "{how:?}: one round trip per call, plus a pause check for each that slept if asking"
    );

    // 8 at once, then 32 tokens at 9/s: 32 intervals of 111.111112 ms (the server's
    // interval, rounded up to the nanosecond).
    let ideal = secs(&bucket["ideal_total_s"]);
    assert!((ideal - 32.0 * 0.111_111_112).abs() < 1e-9, "{ideal}");
    // From the instant the replicas fired to the upstream's last arrival, on one clock: the
    // bucket cannot let the last call go earlier, and the measurement adds no credit.
    let total = secs(&bucket["total_s"]);
    assert!(
        total >= ideal,
        "the last call arrived after {total} s, before the ideal {ideal} s"
    );
    // Late only by the machine's doing: the schedule starts at the first grant, the server
    // has the last call sleep until the ideal after it, and what the last call's wait took
    // beyond its sleep (round trips, a timer's lateness) is the machine's, measured in the
    // same run (bounded by the run's largest such share, and the server's whole ms).
    let first_token = secs(&bucket["first_token_s"]);
    let last_sent = secs(&bucket["last_sent_s"]);
    let machine = secs(&bucket["machine_wait_max_ms"]) / 1e3;
    assert!(
        last_sent <= first_token + ideal + machine + 0.001,
        "the last call was sent {last_sent} s after the start, later than the ideal {ideal} s \
         after the first grant at {first_token} s by more than the machine's largest share of \
         a wait in this run ({machine} s): {bucket}"
    );
    // The upstream's line 10 + 10·t was never crossed: 2 calls to spare at the burst, and the
    // machine's delays only take arrivals further below it.
    assert!(secs(&bucket["min_headroom"]) >= 1.0, "{bucket}");
    // The call with the last token began at most `start_lag_max_ms` after the start, and
    // the server's millisecond clock may read up to 1 ms early.
    let start_lag = secs(&bucket["start_lag_max_ms"]) / 1e3;
    assert!(
        secs(&bucket["wait_max_s"]) >= ideal - start_lag - 0.001,
        "{bucket}"
    );
}

#[test]
fn the_script_backend_on_a_server_without_the_module_gives_the_same_table() {
    let _turn = turn();
    // It also asks rather than listens, so that the pause check by PEEK runs somewhere.
    let summary = PIX_DEMO.run("script", &["--backend", "script", "--no-listen"]);
    // The private server was started without --loadmodule: THROTTLE.TAKE is an unknown
    // command there, as on a managed Redis that refuses MODULE LOAD.
    assert_eq!(summary["module_loaded"], false, "{summary}");
    let redis = summary["redis"].as_str().unwrap();
    assert!(redis.contains("without the module"), "{redis}");
    assert_eq!(summary["args"]["backend"], "script");
    // Both replicas' limiters say the script served them.
    assert_eq!(summary["backend"], "script", "{summary}");
    let bucket = phase(&summary, "bucket");
    assert_eq!(bucket["backend"], "script", "{bucket}");
    assert_served_on_time(bucket, RoundTrips::Asking);
    assert_direct_is_refused_as_the_arrivals_allow(phase(&summary, "direct"), Upstream::Bucket);
}

/// How the mock upstream counts (`--upstream-mode`).
#[derive(Clone, Copy, Debug)]
enum Upstream {
    Bucket,
    Window,
}

/// The direct phase: all 40 calls fire at once, and how together they reach the upstream is
/// the machine's doing. The upstream serves the first `quota` for sure and, over the
/// observed arrival span, at most one more per refill (bucket: `quota` per second; +1 as the
/// span is a rounded decimal in the JSON) or `quota` per second begun (window); everything
/// else is refused. The demo's prediction is that bound, computed from the exact instants.
#[track_caller]
fn assert_direct_is_refused_as_the_arrivals_allow(direct: &Value, upstream: Upstream) {
    const QUOTA: u64 = 10;
    let span = secs(&direct["arrival_span_s"]);
    let (served, refused) = (int(&direct["served"]), int(&direct["refused"]));
    assert_eq!(
        (int(&direct["errors"]), int(&direct["other_status"])),
        (0, 0),
        "{direct}"
    );
    assert_eq!(served + refused, 40, "{direct}");
    let most = match upstream {
        Upstream::Bucket => QUOTA + (QUOTA as f64 * span).floor() as u64 + 1,
        Upstream::Window => QUOTA * ((span + 1e-6).floor() as u64 + 1),
    }
    .min(40);
    assert!(
        (QUOTA..=most).contains(&served),
        "{served} served of 40 arriving over {span} s ({upstream:?}): {QUOTA} to {most}: {direct}"
    );
    assert!(refused >= 40 - most, "{direct}");
    assert_eq!(direct["predicted_is_bound"], true, "{direct}");
    let predicted = int(&direct["predicted_served"]);
    assert!(
        (served..=most).contains(&predicted),
        "the demo predicts at most {predicted} served: {direct}"
    );
    assert_eq!(
        int(&direct["predicted_refused"]),
        40 - predicted,
        "{direct}"
    );
}

#[test]
fn a_strict_window_refuses_the_default_bucket_and_says_what_fits() {
    let _turn = turn();
    let summary = PIX_DEMO.run("window", &["--upstream-mode", "window"]);
    let direct = phase(&summary, "direct");
    assert_direct_is_refused_as_the_arrivals_allow(direct, Upstream::Window);
    let bucket = phase(&summary, "bucket");
    assert!(
        int(&bucket["refused"]) > 0,
        "8 + 9/s is over a window of 10: {bucket}"
    );
    // Had the fleet not paused: 6 of the 8 + 9 in the first second. Obeying: 1 (below).
    assert_eq!(
        int(&bucket["predicted_refused_without_pause"]),
        6,
        "{bucket}"
    );
    assert_eq!(int(&bucket["predicted_refused"]), 1, "{bucket}");
    assert_eq!(summary["fits"], false);
    let reason = summary["fit_reason"].as_str().unwrap();
    assert!(
        reason.contains("capacity + rate <= quota in any second")
            && reason.contains("8 + 9 = 17 > 10"),
        "{reason}"
    );
    assert_eq!(summary["fit_example"], serde_json::json!([5, 5]));
}

/// The shared bucket's time per token at 9/s, as the server computes it (rounded up to the ns).
const INTERVAL_9_S: f64 = 0.111_111_112;
/// Room for the clocks: the mock's is this machine's monotonic clock, the bucket's the
/// server's (Redis's own monotonic clock, or TIME for the script); over a few seconds they
/// differ by well under a millisecond, and the server counts the pause in whole ms.
const CLOCKS_S: f64 = 0.003;

/// One call as the mock saw it, from the JSON summary.
#[derive(Debug)]
struct Arrival {
    t: f64,
    replica: u64,
    status: u64,
    retry_after: Option<u64>,
}

fn arrivals(phase: &Value) -> Vec<Arrival> {
    phase["arrivals"]
        .as_array()
        .expect("arrivals")
        .iter()
        .map(|a| Arrival {
            t: secs(&a["t_s"]),
            replica: int(&a["replica"]),
            status: int(&a["status"]),
            retry_after: a["retry_after_s"].as_u64(),
        })
        .collect()
}

/// The default run's 2 x 20 calls were all served in the end (retried after a 429 where one
/// came): none left unserved, none failed.
#[track_caller]
fn assert_every_call_served(bucket: &Value) {
    let counts = (
        int(&bucket["served"]),
        int(&bucket["unserved"]),
        int(&bucket["errors"]),
    );
    assert_eq!(counts, (40, 0, 0), "every call served in the end: {bucket}");
}

/// 2 x 10 calls, each served at its first send: the supplier refused none.
#[track_caller]
fn assert_served_and_never_refused(bucket: &Value) {
    let counts = (int(&bucket["served"]), int(&bucket["refused"]));
    assert_eq!(counts, (20, 0), "{bucket}");
}

#[test]
fn a_429_pauses_the_whole_fleet_and_every_call_is_served_in_the_end() {
    let _turn = turn();
    let summary = PIX_DEMO.run("window-pause", &["--upstream-mode", "window"]);
    // Against a window the replicas poll unless told otherwise: a pause holds back every
    // call that has not sent yet, and a polling call holds no slot while it waits.
    assert_eq!(summary["strategy"], "poll", "{summary}");
    assert!(
        summary["args"]["strategy"].is_null(),
        "defaulted: {summary}"
    );
    let bucket = phase(&summary, "bucket");
    assert_every_call_served(bucket);
    let log = arrivals(bucket);

    // The mock decides the first 429: 8 at once and 2 refills fill its window of 10 within
    // the first second, so the 11th arrival (3 intervals in) is refused, told to come back
    // when the oldest call leaves the window: under a second away, rounded up to 1 s.
    let first = log
        .iter()
        .position(|a| a.status == 429)
        .unwrap_or_else(|| panic!("no 429: {bucket}"));
    assert_eq!(first, 10, "{log:?}");
    let (t429, retry_after) = (log[first].t, log[first].retry_after);
    assert_eq!(retry_after, Some(1), "{log:?}");
    let resume = t429 + 1.0;

    // The pause: from the 429 until its Retry-After ran out, no call reached the API from
    // either replica (the server holds every token back; none was due for 111 ms anyway
    // when the 429 came, so none was in flight).
    let after = &log[first + 1..];
    let early: Vec<_> = after.iter().filter(|a| a.t < resume - CLOCKS_S).collect();
    assert!(
        early.is_empty(),
        "calls reached the API during the pause ({t429:.3} s to {resume:.3} s): {early:?}"
    );
    // Both replicas were held back, not done: each has calls after the pause.
    for replica in 0..2 {
        assert!(
            after.iter().any(|a| a.replica == replica),
            "replica {replica} sent nothing after the pause: {log:?}"
        );
    }
    // The fleet resumes from a single token, one per interval, no burst: the j-th call
    // after the pause reaches the API no earlier than j intervals after it ended (the
    // server's guarantee, whatever the machine does).
    let mut late_max = 0.0_f64;
    for (j, a) in after.iter().enumerate() {
        let slot = resume + j as f64 * INTERVAL_9_S;
        assert!(
            a.t >= slot - CLOCKS_S,
            "call {j} after the pause arrived at {:.4} s, before its slot {slot:.4} s: {log:?}",
            a.t
        );
        late_max = late_max.max(a.t - slot);
    }
    // After a pause of at least a second the window holds only calls sent after it. A 429
    // there needs 11 arrivals within 1 s, whose tokens span at least 10 intervals (1.111 s),
    // so some call reached the API more than 10 intervals - 1 s (111 ms) after its slot.
    // The machine decides whether that happens; when it does not, no 429 can come.
    let refused_after = after.iter().filter(|a| a.status == 429).count() as u64;
    let bunching = 10.0 * INTERVAL_9_S - 1.0;
    eprintln!(
        "after the pause: latest arrival {:.1} ms behind its slot, {refused_after} 429s",
        late_max * 1e3
    );
    if late_max < bunching - CLOCKS_S {
        assert_eq!(refused_after, 0, "{log:?}");
        assert_eq!(
            (
                int(&bucket["refused"]),
                int(&bucket["pauses"]),
                int(&bucket["retries"])
            ),
            (1, 1, 1),
            "one 429, one pause, one retry: {bucket}"
        );
    } else {
        // Each 429 paused the fleet again and was retried: bounded by the attempts.
        assert_eq!(
            (int(&bucket["pauses"]), int(&bucket["retries"])),
            (1 + refused_after, 1 + refused_after),
            "{bucket}"
        );
    }
    // The report says what the log says.
    assert_eq!(
        int(&bucket["seen_429"]),
        int(&bucket["refused"]),
        "{bucket}"
    );
    assert_eq!(int(&bucket["arrivals_in_first_pause"]), 0, "{bucket}");
    assert_eq!(
        int(&bucket["refused_after_first_pause"]),
        refused_after,
        "{bucket}"
    );
    assert!(
        (secs(&bucket["first_429_s"]) - t429).abs() < 1e-6,
        "{bucket}"
    );
    assert_eq!(
        int(&bucket["pauses_absorbed"]),
        0,
        "nothing was reserved: {bucket}"
    );
    // On an ideal machine: 10 calls, the 429 at 3 intervals, the pause of 1 s, then the
    // other 30 at 9/s: the last one 32 intervals + 1 s after the start. Nothing is earlier.
    assert_eq!(
        (
            int(&bucket["predicted_refused"]),
            int(&bucket["predicted_pauses"])
        ),
        (1, 1),
        "{bucket}"
    );
    let ideal = secs(&bucket["ideal_total_s"]);
    assert!(
        (ideal - (32.0 * INTERVAL_9_S + 1.0)).abs() < 1e-6,
        "{ideal}"
    );
    assert!(secs(&bucket["total_s"]) >= ideal - CLOCKS_S, "{bucket}");
    // The chart marks the pause.
    let chart = std::fs::read_to_string(PIX_DEMO.chart_path("window-pause")).expect("the chart");
    assert!(
        chart.contains("fleet paused (Retry-After)") && chart.contains("paused "),
        "no pause on the chart"
    );
}

#[test]
fn reservations_keep_their_slots_through_a_pause() {
    let _turn = turn();
    let summary = PIX_DEMO.run(
        "window-reserve",
        &[
            "--upstream-mode",
            "window",
            "--strategy",
            "reserve",
            "--calls",
            "10",
            // Before issue 19: a 429 only pauses, and a reserved call does not look.
            "--no-cut",
            "--no-pause-check",
        ],
    );
    let bucket = phase(&summary, "bucket");
    // Every call reserved its slot at the start; the window refuses the 6 slots from 3 to
    // 8 intervals (as without any pause), and a pause never moves a slot already granted.
    assert_eq!(
        (
            int(&bucket["predicted_refused"]),
            int(&bucket["predicted_pauses"])
        ),
        (6, 6),
        "{bucket}"
    );
    let refused = int(&bucket["refused"]);
    assert!(refused >= 1, "{bucket}");
    assert!(
        int(&bucket["arrivals_in_first_pause"]) > 0,
        "reserved calls went during the pause: {bucket}"
    );
    assert!(
        int(&bucket["pauses_absorbed"]) >= 1,
        "the bucket already owed tokens beyond the pause: {bucket}"
    );
    // Every 429 paused and was retried, and every call was served in the end.
    assert_eq!(int(&bucket["pauses"]), refused, "{bucket}");
    assert_eq!(int(&bucket["retries"]), refused, "{bucket}");
    assert_eq!(
        (int(&bucket["served"]), int(&bucket["unserved"])),
        (20, 0),
        "{bucket}"
    );
}

#[test]
fn a_strict_window_serves_a_bucket_within_its_quota() {
    let _turn = turn();
    let summary = PIX_DEMO.run(
        "window-fits",
        &[
            "--upstream-mode",
            "window",
            "--capacity",
            "5",
            "--rate",
            "5",
            "--calls",
            "10",
        ],
    );
    assert_eq!(summary["fits"], true);
    let bucket = phase(&summary, "bucket");
    assert_served_and_never_refused(bucket);
}

#[test]
fn polling_keeps_under_the_quota_too() {
    let _turn = turn();
    let summary = PIX_DEMO.run("poll", &["--strategy", "poll", "--calls", "10"]);
    let bucket = phase(&summary, "bucket");
    assert_served_and_never_refused(bucket);
    assert!(
        int(&bucket["round_trips"]) > 20,
        "polling retries: {bucket}"
    );
    assert!(secs(&bucket["total_s"]) >= secs(&bucket["ideal_total_s"]));
}

#[test]
fn an_unreachable_redis_is_a_clear_error() {
    let _turn = turn();
    let output = PIX_DEMO.output_within(
        PIX_DEMO.command("unreachable", &["--redis-url", "redis://127.0.0.1:1"]),
        Duration::from_secs(30),
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot connect to redis://127.0.0.1:1"),
        "{stderr}"
    );
}

#[test]
fn ctrl_c_stops_redis_and_the_replicas() {
    let _turn = turn();
    let (status, seen) = PIX_DEMO.signal_midway("ctrl-c", &[], "phase 2", "INT");
    assert_eq!(status.code(), Some(130), "{seen}");
    assert_replicas_and_redis_stopped(&seen);
}

#[test]
fn even_a_kill_leaves_nothing_running() {
    let _turn = turn();
    let (_, seen) = PIX_DEMO.signal_midway("kill", &[], "phase 2", "KILL");
    assert_replicas_and_redis_stopped(&seen);
}

/// The private Redis no longer answers, and no replica of this run is left (a replica's
/// command line names the mock API).
fn assert_replicas_and_redis_stopped(seen: &str) {
    let upstream = between(seen, "mock API on ", ": ");
    assert_everything_stopped(seen, "replicas", upstream);
}

/// Issue 19: a bucket above the supplier (15/s against nginx-style 10 r/s, burst 9, 429
/// without Retry-After), 2 x 20 calls, the default strategy (reserve). The first 429 pauses
/// and cuts the bucket; every reserved call the pause covers looks before it is sent (the
/// pause check) and is held back. Before (pause only, no check) 10 or 11 were refused.
#[test]
fn a_bucket_above_the_supplier_is_refused_at_most_three_times_and_every_call_is_served() {
    let _turn = turn();
    let summary = PIX_DEMO.run("above-supplier", &["--rate", "15", "--no-retry-after"]);
    let bucket = phase(&summary, "bucket");
    let refused = int(&bucket["refused"]);
    assert!(refused <= 3, "{refused} refused: {bucket}");
    assert_every_call_served(bucket);
    let pushback = &summary["pushback"];
    assert_eq!(int(&pushback["fleet_refused"]), refused, "{pushback}");
    assert_eq!(summary["args"]["no_retry_after"], true);
    if refused > 0 {
        // The first 429 cut the rate, once per episode, and the pause held reserved calls.
        assert!(int(&pushback["cuts"]) >= 1, "{pushback}");
        assert!(int(&pushback["held_by_pause"]) >= 1, "{pushback}");
        // Sampled every 250 ms: the cut's 0.7, or a little above as it climbs back.
        assert!(int(&pushback["lowest_factor_bp"]) <= 7_100, "{pushback}");
    }
    let seconds = pushback["seconds"].as_array().expect("seconds");
    let sent: u64 = seconds.iter().map(|s| int(&s["fleet_sent"])).sum();
    assert_eq!(sent, 40 + int(&bucket["retries"]), "{pushback}");
}

/// The refused share after the warm-up the shortened run must stay under: the target is
/// 1 %; measured 0 to 0.74 % (3 of them refused in the first 10 s), with margin for a busy
/// machine.
const REFUSED_SHARE_BOUND: f64 = 0.03;

/// Issue 19's other application, shortened: 25 s of sustained load (2 replicas x 4 calls in
/// flight, bucket 8 + 9/s) against the nginx-style 10 r/s, another application taking 3/s
/// until 12 s, the supplier's count in its headers, a cut recovering over 8 s. After the
/// first 10 s the fleet's refused calls stay a small share of its sends, it is served
/// close to what the other application leaves it, and after the stop it is back near the
/// bucket's rate within the recovery time.
#[test]
fn another_application_sharing_the_quota_costs_few_refusals_and_the_rate_comes_back() {
    let _turn = turn();
    let summary = PIX_DEMO.run(
        "other-app",
        &[
            "--duration",
            "25",
            "--other-app",
            "3",
            "--other-app-stop-after",
            "12",
            "--no-retry-after",
            "--supplier-headers",
            "--cut-recovery",
            "8",
        ],
    );
    let p = &summary["pushback"];
    assert!(int(&p["other_sent"]) >= 30, "{p}");
    let share = secs(&p["refused_share_after_warm_up"]);
    assert!(share <= REFUSED_SHARE_BOUND, "{share}: {p}");
    let bucket = phase(&summary, "bucket");
    assert_eq!(int(&bucket["errors"]), 0, "{bucket}");
    // Recovered (95 % of 9/s over 3 s) within the recovery time, 8 s, plus the window.
    let recovered = secs(&p["recovered_after_s"]);
    assert!(recovered <= 8.0 + 3.0, "{recovered}: {p}");
}

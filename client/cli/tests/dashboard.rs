//! `throttle dashboard` in a real browser: a real server with the module (test kit), a real
//! `FleetReport` and two limiters (one acquires and is paused, one acquires), the dashboard on
//! a free loopback port, then Debian's headless Chromium loads the page and the test reads the
//! DOM its script built: each quota's row with its capacity and rate, a tokens chart with a
//! path, the pause band on the paused quota's charts alone, and the calls in flight of the
//! capped quota against its cap. Also: a non-loopback address is refused; `/metrics` gives a
//! reported quota's gauges and escapes a hostile key.
//!
//! ```sh
//! tests/install-servers.sh --apt-only   # Debian's chromium among the packages
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle-cli --test dashboard
//! ```
//!
//! `THROTTLE_SCREENSHOT=/tmp/dashboard.png` also saves a screenshot of the page (1200x800),
//! after 20 s more of traffic (acquires and 429s on one quota, cut half-way).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use redis_throttle::prelude::*;
use redis_throttle::report::{report_key, Counter, FleetReport};
use redis_throttle::{HttpEvent, Limiter, Quota};
use serde_json::Value as Json;
use throttle_testkit::{Flavor, Server};

/// Bound on each wait: a report landing, the dashboard starting, samples piling up.
mod common;
use common::{connect, report_when, set_raw, started};

const BOUND: Duration = Duration::from_secs(15);
/// Bound on one run of Chromium.
const BROWSER_BOUND: Duration = Duration::from_secs(90);

const PAUSED: &str = "quota:dash:paused";
const CALM: &str = "quota:dash:calm";

/// Debian's Chromium, or a failure that says how to install it.
fn chromium() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("chromium"))
            .find(|bin| bin.is_file())
    });
    found.unwrap_or_else(|| {
        panic!(
            "chromium is not installed: this test loads the dashboard in Debian's headless \
             Chromium; run tests/install-servers.sh (or tests/install-servers.sh --apt-only), \
             which installs it"
        )
    })
}

/// The dashboard process, killed when the test ends.
struct Dashboard {
    child: Child,
    base: String,
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `throttle --url URL dashboard --listen 127.0.0.1:0` and reads the address it serves.
fn start_dashboard(url: &str) -> Dashboard {
    let mut child = Command::new(env!("CARGO_BIN_EXE_throttle"))
        .args(["--url", url, "dashboard", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("run throttle dashboard");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let mut dashboard = Dashboard {
        child,
        base: String::new(),
    };
    let line = rx
        .recv_timeout(BOUND)
        .expect("the dashboard said where it serves");
    // "throttle dashboard: http://127.0.0.1:PORT/ (...)"
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    dashboard.base = base.to_owned();
    dashboard
}

/// GET of `path` on the dashboard: the body.
fn get(base: &str, path: &str) -> String {
    let host = base.trim_start_matches("http://").trim_end_matches('/');
    let (head, body) = request(base, host, path);
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    body
}

/// Runs Chromium headless with `args` then `url`, within `BROWSER_BOUND`: its stdout.
fn browse(args: &[&str], url: &str) -> String {
    let profile = std::env::temp_dir().join(format!("throttle-dashboard-{}", std::process::id()));
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run chromium");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > BROWSER_BOUND {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {BROWSER_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = out.join().unwrap();
    let errors = err.join().unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    assert!(status.success(), "chromium failed: {status:?}\n{errors}");
    text
}

/// The keys of `/status.json`'s rows, in order.
fn keys_of(rows: &Json) -> Vec<&str> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect()
}

/// The part of `text` from the first `opening` to the `closing` after it (left out): a row of
/// the page, a chart of a row.
fn part<'a>(text: &'a str, opening: &str, closing: &str) -> &'a str {
    let start = text
        .find(opening)
        .unwrap_or_else(|| panic!("no {opening} in:\n{text}"));
    let end = text[start..]
        .find(closing)
        .unwrap_or_else(|| panic!("no {closing} after {opening} in:\n{text}"));
    &text[start..start + end]
}

/// The `<tr ...>...</tr>` of `key` in the DOM.
fn row_of<'a>(dom: &'a str, key: &str) -> &'a str {
    part(dom, &format!("<tr data-key=\"{key}\""), "</tr>")
}

/// Asserts the row's cell of `class` shows `text` (in full).
fn assert_cell(row: &str, class: &str, text: &str) {
    assert!(
        row.contains(&format!("<td class=\"{class}\">{text}</td>")),
        "the {class} cell is not {text:?}: {row}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_each_quota_its_charts_and_the_pause() {
    let browser = chromium();
    let (_server, url, mut con) = started(Flavor::Redis70).await;

    // The demo: one process reporting two limiters; one acquires, sees two 429s and is
    // paused for a minute, the other acquires.
    let fleet = FleetReport::every(connect(&url).await, Duration::from_millis(200)).unwrap();
    let paused = Limiter::builder(PAUSED, Quota::new(10, 5u64).unwrap())
        .report(&fleet)
        .build(connect(&url).await)
        .unwrap();
    // The calm one caps its calls in flight at 3 and holds one call open throughout.
    let calm = Limiter::builder(CALM, Quota::new(20, 2u64).unwrap())
        .max_in_flight(3)
        .report(&fleet)
        .build(connect(&url).await)
        .unwrap();
    for _ in 0..4 {
        paused.acquire().await.unwrap();
    }
    let _open_call = calm.acquire().await.unwrap();
    paused.count(HttpEvent::Response429);
    paused.count(HttpEvent::Response429);
    paused.pause(Duration::from_secs(60)).await.unwrap();
    for key in [PAUSED, CALM] {
        report_when(&mut con, key, fleet.process(), BOUND, |r| {
            r.total.get(Counter::Granted) > 0
        })
        .await;
    }

    let dashboard = start_dashboard(&url);
    let base = dashboard.base.clone();
    // A few samples, so that the charts have lines and the band a width.
    let history = tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        loop {
            let history: Json = serde_json::from_str(&get(&base, "/history.json")).unwrap();
            let samples = history["quotas"]
                .as_array()
                .unwrap()
                .iter()
                .find(|q| q["key"] == PAUSED)
                .map_or(0, |q| q["samples"].as_array().unwrap().len());
            if samples >= 3 {
                return history;
            }
            assert!(
                start.elapsed() < BOUND,
                "no 3 samples within {BOUND:?}: {history:#}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    })
    .await
    .unwrap();
    let quota = history["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["key"] == PAUSED)
        .unwrap();
    assert!(
        !quota["charts"]["paused"].as_array().unwrap().is_empty(),
        "{quota:#}"
    );
    // /status.json: the rows of `status --json`.
    let base = dashboard.base.clone();
    let rows: Json = serde_json::from_str(
        &tokio::task::spawn_blocking(move || get(&base, "/status.json"))
            .await
            .unwrap(),
    )
    .unwrap();
    let keys = keys_of(&rows);
    assert_eq!(keys, [CALM, PAUSED]);

    let base = dashboard.base.clone();
    let dom = tokio::task::spawn_blocking(move || browse(&["--dump-dom"], &base))
        .await
        .unwrap();
    assert!(browser.is_file());

    let row = row_of(&dom, PAUSED);
    assert!(
        row.contains("class=\"paused\""),
        "the row is marked paused: {row}"
    );
    assert_cell(row, "key", PAUSED);
    assert_cell(row, "capacity", "10");
    assert_cell(row, "rate", "5");
    // The pause left, in seconds (about a minute).
    assert!(row.contains("<td class=\"paused\">5"), "{row}");
    assert!(row.contains("<svg class=\"chart tokens\""), "{row}");
    let tokens_chart = part(row, "<svg class=\"chart tokens\"", "</svg>");
    assert!(
        tokens_chart.contains("<path class=\"line\" d=\"M") && tokens_chart.contains(" L"),
        "a tokens line through the samples: {tokens_chart}"
    );
    assert!(
        tokens_chart.contains("<rect class=\"band paused\""),
        "the pause band: {tokens_chart}"
    );
    assert!(row.contains("<svg class=\"chart wait\""), "{row}");
    assert!(row.contains("<svg class=\"chart r429\""), "{row}");
    // No cap.
    assert_cell(row, "in_flight", "-");
    assert!(!row.contains("chart in_flight"), "no cap, no chart: {row}");

    let row = row_of(&dom, CALM);
    assert_cell(row, "key", CALM);
    assert_cell(row, "capacity", "20");
    assert_cell(row, "rate", "2");
    assert!(row.contains("<path class=\"line\" d=\"M"), "{row}");
    assert!(!row.contains("band paused"), "not paused: {row}");
    // One call open of a cap of 3.
    assert_cell(row, "in_flight", "1/3");
    let in_flight_chart = part(row, "<svg class=\"chart in_flight\"", "</svg>");
    // One of three held: the line at two thirds of the chart's height down (y 20 of 30).
    assert!(
        in_flight_chart.contains(" 20.0 L")
            && in_flight_chart.contains("<text x=\"2\" y=\"8\">3</text>"),
        "a line at 1 on a scale of 0 to the cap, 3: {in_flight_chart}"
    );
    assert!(dom.contains("2 quota(s), sampled "), "the header: {dom}");
    assert!(
        !dom.contains("<tr class=\"detail\""),
        "no quota opened: {dom}"
    );

    // The calm quota's charts at full size: a scale, a time axis, the cap as a line.
    let opened = format!("{}#q={CALM}", dashboard.base);
    let dom = tokio::task::spawn_blocking(move || browse(&["--dump-dom"], &opened))
        .await
        .unwrap();
    let detail = part(&dom, "<tr class=\"detail\"", "</tr>");
    assert_eq!(
        detail.matches("<figure>").count(),
        4,
        "four charts: {detail}"
    );
    assert!(
        detail.contains(&format!("<figcaption>{CALM}: calls in flight</figcaption>")),
        "{detail}"
    );
    for tick in [">-60 s</text>", ">-30 s</text>", ">now</text>", ">now = "] {
        assert!(detail.contains(tick), "the time axis ({tick}): {detail}");
    }
    // To the detail's end: the big chart nests an <svg> of its own.
    let in_flight = &detail[detail.find("<svg class=\"chart big in_flight\"").unwrap()..];
    assert!(
        in_flight.contains("<line class=\"cap\" x1=\"0\" x2=\"120\" y1=\"0\" y2=\"0\">")
            && in_flight.contains(">cap 3</text>"),
        "the cap of 3 as a line at the top of the scale, named: {in_flight}"
    );
    assert_eq!(
        dom.matches("<tr class=\"detail\"").count(),
        1,
        "only the one opened"
    );

    if let Some(path) = std::env::var_os("THROTTLE_SCREENSHOT") {
        // 20 s more of traffic on the calm quota, a 429 now and then, a cut half-way.
        let start = Instant::now();
        let mut cut = false;
        while start.elapsed() < Duration::from_secs(20) {
            calm.acquire().await.unwrap();
            calm.acquire().await.unwrap();
            calm.count(HttpEvent::Response429);
            if !cut && start.elapsed() > Duration::from_secs(10) {
                let output = Command::new(env!("CARGO_BIN_EXE_throttle"))
                    .args(["--url", &url, "cut", CALM, "0.5", "30s"])
                    .output()
                    .unwrap();
                assert!(output.status.success(), "{output:?}");
                cut = true;
            }
        }
        // The page with the calm quota's charts open at full size.
        let base = format!("{}#q={CALM}", dashboard.base);
        let arg = format!("--screenshot={}", PathBuf::from(path).display());
        tokio::task::spawn_blocking(move || browse(&[&arg, "--window-size=1400,900"], &base))
            .await
            .unwrap();
    }
    drop(dashboard);
    drop((paused, calm));
}

#[test]
fn a_non_loopback_address_is_refused_without_public() {
    let output = Command::new(env!("CARGO_BIN_EXE_throttle"))
        .args([
            "--url",
            "redis://127.0.0.1:1",
            "dashboard",
            "--listen",
            "0.0.0.0:9911",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to serve the dashboard on 0.0.0.0:9911: not a loopback address")
            && stderr.contains("--public"),
        "{stderr}"
    );
}

/// One request with `Host: host` on a connection of its own: the head (status line and
/// headers) and the body.
fn request(base: &str, host: &str, path: &str) -> (String, String) {
    let addr = base.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(BOUND)).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.to_owned(), body.to_owned())
}

/// M3: a report that is not UTF-8 neither stops the dashboard from starting nor hides the
/// other quotas from `/status.json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_that_is_not_utf8_does_not_stop_the_dashboard() {
    let (_server, url, mut con) = started(Flavor::Redis70).await;
    let good = "v1 at=1 period=1000 process=p capacity=10 rate=5 key=quota:good";
    for (key, value) in [
        (report_key("quota:good", "p").into_bytes(), good.as_bytes()),
        (
            b"throttle:report:{junk}:p".to_vec(),
            b"\xff\xfe junk".as_slice(),
        ),
    ] {
        set_raw(&mut con, &key, value).await;
    }
    let dashboard = start_dashboard(&url);
    let base = dashboard.base.clone();
    let (status, history) = tokio::task::spawn_blocking(move || {
        (get(&base, "/status.json"), get(&base, "/history.json"))
    })
    .await
    .unwrap();
    let rows: Json = serde_json::from_str(&status).unwrap();
    let keys = keys_of(&rows);
    assert_eq!(keys, ["quota:good"]);
    assert_eq!(rows[0]["state"]["tokens"], 10);
    let history: Json = serde_json::from_str(&history).unwrap();
    assert_eq!(
        history["footer"],
        serde_json::json!(["throttle:report:{junk}:p: not a report line (7 bytes): skipped"])
    );
}

/// L4: the dashboard answers only requests for its own address (`Host`), so that a DNS
/// rebinding of another site cannot read it; another host is refused with 421 and what to
/// open instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_another_host_is_refused() {
    let server = Server::builder(Flavor::Redis70).start();
    let dashboard = start_dashboard(&server.url());
    let base = dashboard.base.clone();
    tokio::task::spawn_blocking(move || {
        let addr = base.trim_start_matches("http://").trim_end_matches('/');
        let port = addr.rsplit_once(':').unwrap().1;
        for host in [addr.to_owned(), format!("localhost:{port}")] {
            let (head, body) = request(&base, &host, "/status.json");
            assert!(head.starts_with("HTTP/1.0 200 OK\r\n"), "{host}: {head}");
            assert_eq!(body, "[]");
        }
        for host in [
            format!("rebound.example:{port}"),
            format!("127.0.0.1:{}", port.parse::<u16>().unwrap().wrapping_add(1)),
        ] {
            for path in ["/status.json", "/history.json", "/"] {
                let (head, body) = request(&base, &host, path);
                assert!(
                    head.starts_with("HTTP/1.0 421 Misdirected Request\r\n"),
                    "{host}{path}: {head}"
                );
                assert_eq!(
                    body,
                    format!(
                        "throttle dashboard: refused the Host {host:?}: this dashboard answers \
                         only requests for its own address (another name could be a DNS \
                         rebinding of another site); open http://{addr}/\n"
                    )
                );
            }
        }
    })
    .await
    .unwrap();
}

/// L4: a client that sends half a request is closed after the read timeout (5 s), and the
/// dashboard holds at most 64 connections at once: the 65th is told so (503) and closed; once
/// the slow ones are gone, a request is answered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_time_out_and_connections_are_bounded() {
    const HELD: usize = 64;
    let server = Server::builder(Flavor::Redis70).start();
    let dashboard = start_dashboard(&server.url());
    let base = dashboard.base.clone();
    tokio::task::spawn_blocking(move || {
        let addr = base.trim_start_matches("http://").trim_end_matches('/');
        let start = Instant::now();
        let mut slow: Vec<TcpStream> = (0..HELD)
            .map(|_| {
                let mut stream = TcpStream::connect(addr).unwrap();
                write!(stream, "GET /status.json HTTP/1.1\r\nHost: {addr}\r\n").unwrap();
                stream
            })
            .collect();
        // One more: refused at once, with why.
        let mut extra = TcpStream::connect(addr).unwrap();
        extra.set_read_timeout(Some(BOUND)).unwrap();
        let mut refused = String::new();
        extra.read_to_string(&mut refused).unwrap();
        assert!(
            refused.starts_with("HTTP/1.1 503 Service Unavailable\r\n")
                && refused.ends_with(
                    "\r\n\r\nthrottle dashboard: too many connections at once (64); close some, \
                     or try again in a moment\n"
                ),
            "{refused:?}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(4),
            "{:?}",
            start.elapsed()
        );
        // Each slow one is closed by the server, unanswered, after the read timeout.
        for stream in &mut slow {
            stream.set_read_timeout(Some(BOUND)).unwrap();
            let mut rest = Vec::new();
            // Closed: the end of the stream (or a reset), and nothing was answered.
            let _ = stream.read_to_end(&mut rest);
            assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
        }
        let closed = start.elapsed();
        assert!(
            closed >= Duration::from_millis(4900) && closed < Duration::from_secs(12),
            "the slow clients were closed after {closed:?}"
        );
        let (head, _) = request(&base, addr, "/status.json");
        assert!(head.starts_with("HTTP/1.0 200 OK\r\n"), "{head}");
    })
    .await
    .unwrap();
}

/// Issue 42: `/metrics` is the last sample in the Prometheus text format (0.0.4): a reported
/// quota's gauges, and a hostile key escaped on its one line (no line of its own forged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_the_last_sample_for_prometheus() {
    let (_server, url, mut con) = started(Flavor::Redis70).await;
    let good = "v1 at=1 period=1000 process=p capacity=10 rate=5 max_in_flight=4 \
                p.granted=4 p.r429=3 key=quota:prom";
    let hostile_key = "evil\"} 1\nthrottle_tokens{key=\"forged\"} 99\\";
    let hostile = format!("v1 at=1 period=1000 process=p capacity=7 rate=1 key={hostile_key}");
    for (key, value) in [
        (report_key("quota:prom", "p"), good.to_owned()),
        (report_key(hostile_key, "p"), hostile),
    ] {
        set_raw(&mut con, key.as_ref(), value.as_ref()).await;
    }
    let dashboard = start_dashboard(&url);
    let base = dashboard.base.clone();
    let (head, body) = tokio::task::spawn_blocking(move || {
        let addr = base.trim_start_matches("http://").trim_end_matches('/');
        request(&base, addr, "/metrics")
    })
    .await
    .unwrap();
    assert!(head.starts_with("HTTP/1.0 200 OK\r\n"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8"),
        "{head}"
    );
    let lines: Vec<&str> = body.lines().collect();
    for expected in [
        "# TYPE throttle_tokens gauge",
        "throttle_capacity{key=\"quota:prom\"} 10",
        "throttle_tokens{key=\"quota:prom\"} 10",
        "throttle_paused_seconds{key=\"quota:prom\"} 0",
        "throttle_rate_factor{key=\"quota:prom\"} 1",
        "throttle_slots_held{key=\"quota:prom\"} 0",
        "throttle_fleet_max_in_flight{key=\"quota:prom\"} 4",
        "throttle_fleet_processes{key=\"quota:prom\"} 1",
        "throttle_fleet_grants_per_second{key=\"quota:prom\"} 4",
        "throttle_fleet_waits{key=\"quota:prom\"} 0",
        "throttle_fleet_responses_429{key=\"quota:prom\"} 3",
        "throttle_sample_failed 0",
        "throttle_capacity{key=\"evil\\\"} 1\\nthrottle_tokens{key=\\\"forged\\\"} 99\\\\\"} 7",
    ] {
        assert!(lines.contains(&expected), "no {expected:?} in\n{body}");
    }
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("throttle_tokens{key=\"forged\"}")),
        "{body}"
    );
    for line in &lines {
        assert!(
            line.starts_with("# HELP throttle_")
                || line.starts_with("# TYPE throttle_")
                || line.starts_with("throttle_"),
            "{line:?}"
        );
    }
}

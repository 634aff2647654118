//! A second client, in another language, held to the command reference: the Python fleet
//! member (`client/examples/python/fleet_member.py`, redis-py) and a Rust process share one
//! quota with a cap of 4 calls in flight, each with 4 callers, against an HTTP supplier that
//! holds every call 50 ms and counts the calls open at once, for 30 s. Both wait for slots in
//! the server's line, so with equal demand each gets half the calls, give or take a tenth,
//! whatever language it is written in. The supplier never sees more than the cap, no call gives
//! up, every call each counts is one the supplier saw from it, and every slot the Python member
//! took it released.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis_throttle::prelude::*;
use redis_throttle::{Backend, Limiter, Quota};
use throttle_e2e::*;

throttle_e2e::per_server!(python_and_rust_share_one_cap);

const CAP: u64 = 4;
const TASKS: usize = 4;
const HOLD: Duration = Duration::from_millis(50);
const RUN: Duration = Duration::from_secs(30);
/// A thousand tokens a second: the cap, not the tokens, holds calls back here.
const CAPACITY: u64 = 1000;
const RATE: &str = "1000";

/// The Debian Python that `python3-redis` installs into (tests/install-servers.sh).
const PYTHON: &str = "/usr/bin/python3";

/// Calls open now, the most ever open, and the calls served per `x-client`.
#[derive(Default)]
struct Seen {
    open: u64,
    most: u64,
    by_client: std::collections::BTreeMap<String, u64>,
}

/// An HTTP supplier on loopback that holds each call `HOLD` and counts what it sees.
fn supplier() -> (String, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let shared = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = Arc::clone(&shared);
            std::thread::spawn(move || serve(stream, &seen));
        }
    });
    (url, seen)
}

fn serve(mut stream: TcpStream, seen: &Mutex<Seen>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut client = String::from("?");
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    for _ in 0..64 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("x-client") {
                client = value.trim().to_owned();
            }
        }
    }
    {
        let mut seen = seen.lock().unwrap();
        seen.open += 1;
        seen.most = seen.most.max(seen.open);
        *seen.by_client.entry(client).or_default() += 1;
    }
    std::thread::sleep(HOLD);
    seen.lock().unwrap().open -= 1;
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

/// One call to the supplier, as the Rust process (a blocking socket on tokio's blocking pool).
async fn get(url: &str) {
    let address = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let response = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let request =
            "GET / HTTP/1.1\r\nHost: supplier\r\nx-client: rust\r\nConnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = Vec::new();
        std::io::Read::read_to_end(&mut stream, &mut response).unwrap();
        response
    })
    .await
    .unwrap();
    assert!(response.starts_with(b"HTTP/1.1 200"), "{response:?}");
}

/// A whole number field of the member's JSON summary.
fn field(summary: &str, name: &str) -> u64 {
    let at = summary
        .find(&format!("\"{name}\": "))
        .unwrap_or_else(|| panic!("no {name} in {summary}"));
    summary[at + name.len() + 4..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

fn python_and_rust_share_one_cap(flavor: Flavor) {
    let server = Server::builder(flavor).start();
    let (url, seen) = supplier();
    let key = "quota:polyglot";
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../client/examples/python/fleet_member.py");
    let mut python = Command::new(PYTHON)
        .arg(&script)
        .args(["--url", &server.url(), "--key", key])
        .args(["--capacity", &CAPACITY.to_string(), "--rate", RATE])
        .args(["--inflight", &CAP.to_string(), "--lease-ms", "5000"])
        .args(["--supplier", &url, "--tasks", &TASKS.to_string()])
        .args(["--seconds", &RUN.as_secs_f64().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{PYTHON} (apt-get install python3-redis): {e}"));

    let rust_calls = runtime().block_on(async {
        let limiter = Limiter::builder(key, Quota::new(CAPACITY, RATE).unwrap())
            .backend(Backend::Module)
            .max_in_flight(CAP)
            .slot_lease(Duration::from_secs(5))
            .build(redis_throttle::connect(&server.url()).await.unwrap())
            .unwrap();
        let end = Instant::now() + RUN;
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let limiter = limiter.clone();
                let url = url.clone();
                tokio::spawn(async move {
                    let mut calls = 0u64;
                    while Instant::now() < end {
                        let grant = limiter.acquire().await.unwrap();
                        get(&url).await;
                        drop(grant);
                        calls += 1;
                    }
                    calls
                })
            })
            .collect();
        let mut calls = 0;
        for task in tasks {
            calls += task.await.unwrap();
        }
        calls
    });

    // Its run is as long as ours: a minute is far past its end.
    within("the Python member's end", Duration::from_secs(60), || {
        python.try_wait().ok().flatten()
    });
    let output = python.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the Python member failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = stdout.lines().last().unwrap_or_default();
    let python_calls = field(summary, "calls");
    assert!(summary.contains("\"backend\": \"module\""), "{summary}");
    assert_eq!(field(summary, "releases"), python_calls, "{summary}");
    assert_eq!(field(summary, "gave_up"), 0, "{summary}");

    let seen = seen.lock().unwrap();
    assert!(
        seen.most <= CAP,
        "the supplier saw {} calls open at once, above the cap of {CAP}",
        seen.most
    );
    assert_eq!(seen.by_client.get("rust"), Some(&rust_calls));
    assert_eq!(seen.by_client.get("python"), Some(&python_calls));
    assert!(rust_calls > 0 && python_calls > 0, "{:?}", seen.by_client);
    let share = python_calls as f64 / (python_calls + rust_calls) as f64;
    println!(
        "{flavor:?}: python {python_calls} calls ({:.1} %, {} takes), rust {rust_calls}, at most {} open",
        share * 100.0,
        field(summary, "takes"),
        seen.most
    );
    assert!(
        (0.4..=0.6).contains(&share),
        "equal demand, unequal shares: python {python_calls}, rust {rust_calls}"
    );
}

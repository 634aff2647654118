//! With the `metrics` feature, the limiter's counters also go to the `metrics` facade.
//! A tiny in-memory recorder, on the test's own thread, against the in-memory server.

use redis_throttle::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::{
    Counter, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use redis_throttle::{Error, Limiter, Quota};
use throttle_e2e::fake::FakeServer;

#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

#[derive(Default)]
struct Level(Mutex<f64>);

impl GaugeFn for Level {
    fn increment(&self, value: f64) {
        *self.0.lock().unwrap() += value;
    }

    fn decrement(&self, value: f64) {
        *self.0.lock().unwrap() -= value;
    }

    fn set(&self, value: f64) {
        *self.0.lock().unwrap() = value;
    }
}

/// Counters, gauges and histograms by `name{label=value,...}` (labels sorted).
#[derive(Default)]
struct TestRecorder {
    counters: Mutex<HashMap<String, Arc<AtomicU64>>>,
    gauges: Mutex<HashMap<String, Arc<Level>>>,
    histograms: Mutex<HashMap<String, Arc<Samples>>>,
    described: Mutex<Vec<String>>,
}

fn render(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

/// The metric registered under `key` in `map`, registered now if it was not.
fn registered<T: Default>(map: &Mutex<HashMap<String, Arc<T>>>, key: &Key) -> Arc<T> {
    map.lock().unwrap().entry(render(key)).or_default().clone()
}

impl TestRecorder {
    fn counter(&self, name: &str) -> u64 {
        self.counters
            .lock()
            .unwrap()
            .get(name)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    fn gauge(&self, name: &str) -> f64 {
        self.gauges
            .lock()
            .unwrap()
            .get(name)
            .map_or(0.0, |g| *g.0.lock().unwrap())
    }

    fn samples(&self, name: &str) -> Vec<f64> {
        self.histograms
            .lock()
            .unwrap()
            .get(name)
            .map_or_else(Vec::new, |h| h.0.lock().unwrap().clone())
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, key: KeyName, _: Option<Unit>, _: SharedString) {
        self.described.lock().unwrap().push(key.as_str().to_owned());
    }

    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn describe_histogram(&self, key: KeyName, _: Option<Unit>, _: SharedString) {
        self.described.lock().unwrap().push(key.as_str().to_owned());
    }

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(registered(&self.counters, key))
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(registered(&self.gauges, key))
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(registered(&self.histograms, key))
    }
}

#[tokio::test(start_paused = true)]
async fn the_counters_go_to_the_metrics_facade() {
    let recorder = TestRecorder::default();
    // Thread-local; the current-thread runtime runs everything on this thread.
    let _guard = metrics::set_default_local_recorder(&recorder);

    let fake = FakeServer::new();
    let limiter = Limiter::builder("user:42:bucket", Quota::new(2, 1u64).unwrap())
        .name("payments")
        .build(fake)
        .unwrap();
    limiter.acquire().await.unwrap();
    limiter.acquire().await.unwrap();
    limiter.acquire().await.unwrap(); // waits 1 s
    assert!(!limiter.try_acquire().await.unwrap().is_granted());
    assert!(matches!(
        limiter
            .acquire_with(Demand::call().within(Duration::from_millis(10)))
            .await,
        Err(Error::DeadlineExceeded { .. })
    ));
    assert!(limiter.acquire_with(Demand::tokens(3)).await.is_err());

    let calls = |outcome: &str| {
        recorder.counter(&format!(
            "throttle_calls_total{{limiter=payments,outcome={outcome}}}"
        ))
    };
    assert_eq!(calls("granted"), 3);
    assert_eq!(calls("denied"), 1);
    assert_eq!(calls("gave_up"), 1);
    assert_eq!(calls("error"), 1);
    assert_eq!(
        recorder.counter("throttle_round_trips_total{backend=module,limiter=payments}"),
        6,
        "the fake answers as the module does: Auto settles on it at the first call; the call \
         that slept looked at the bucket before it went"
    );
    assert_eq!(
        recorder.samples("throttle_wait_seconds{limiter=payments}"),
        [0.0, 0.0, 1.0]
    );
    limiter.pause(Duration::from_secs(1)).await.unwrap();
    limiter
        .cut(redis_throttle::Cut::after(Duration::from_secs(1)))
        .await
        .unwrap();
    let pushback = |event: &str| {
        recorder.counter(&format!(
            "throttle_pushback_total{{event={event},limiter=payments}}"
        ))
    };
    assert_eq!(pushback("pause"), 2, "the pause, and the cut's pause");
    assert_eq!(
        pushback("cut_same_episode"),
        1,
        "cut within the pause: the same episode"
    );
    let described = recorder.described.lock().unwrap().clone();
    for name in [
        "throttle_calls_total",
        "throttle_round_trips_total",
        "throttle_wait_seconds",
    ] {
        assert!(described.iter().any(|d| d == name), "{name} not described");
    }

    // The snapshot says the same.
    let snapshot = limiter.metrics();
    assert_eq!(
        (
            snapshot.granted,
            snapshot.denied,
            snapshot.gave_up,
            snapshot.errors
        ),
        (3, 1, 1, 1)
    );
    assert_eq!(
        snapshot.round_trips, 8,
        "6 for the calls, the pause and the cut"
    );
    assert_eq!(snapshot.pauses, 2);
    assert_eq!(snapshot.pushback.cuts_same_episode, 1);
    assert_eq!(snapshot.total_wait, Duration::from_secs(1));
}

#[tokio::test(start_paused = true)]
async fn a_wait_for_a_slot_goes_to_the_metrics_facade() {
    let recorder = TestRecorder::default();
    let _guard = metrics::set_default_local_recorder(&recorder);
    let limiter = Limiter::builder("llm:bucket", Quota::new(10, 10u64).unwrap())
        .name("llm")
        .max_in_flight(1)
        .build(FakeServer::new())
        .unwrap();
    let held = limiter.acquire().await.unwrap();
    let waiting = limiter.clone();
    let call = tokio::spawn(async move {
        waiting
            .acquire_with(Demand::call().within(Duration::from_millis(100)))
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    // In the server's line, first, while it waits.
    assert_eq!(recorder.gauge("throttle_in_line{limiter=llm}"), 1.0);
    assert_eq!(recorder.gauge("throttle_line_place{limiter=llm}"), 1.0);
    assert_eq!(limiter.metrics().in_flight.in_line, 1);
    assert!(matches!(
        call.await.unwrap(),
        Err(Error::DeadlineExceeded { .. })
    ));
    assert_eq!(recorder.gauge("throttle_in_line{limiter=llm}"), 0.0);
    let in_flight = limiter.metrics().in_flight;
    assert_eq!((in_flight.in_line, in_flight.last_place), (0, 1));
    drop(held);
    assert_eq!(
        recorder.counter("throttle_slots_total{event=wait,limiter=llm}"),
        1
    );
    assert_eq!(
        recorder.counter("throttle_slots_total{event=lease_lost,limiter=llm}"),
        0
    );
    assert!(recorder
        .described
        .lock()
        .unwrap()
        .iter()
        .any(|d| d == "throttle_slots_total"));
}

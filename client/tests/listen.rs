//! Pause announcements heard instead of asked for, on every server and backend: a pause set by
//! one process reaches a reserved call asleep in another through its subscription
//! ([`Announcements`]), with no `THROTTLE.PEEK`; a subscription killed mid-run (`CLIENT KILL
//! TYPE pubsub`) sends no call into a pause (the call asks instead) and comes back by itself.
//!
//! ```sh
//! cargo build -p redis-throttle-module
//! cargo test -p redis-throttle --test listen -- --nocapture
//! ```
//!
//! The server decides what the pause covers and when it ends: checked exactly (no grant before
//! it ends, no look made while the subscription is up). The machine decides how soon the call
//! hears it: printed, and bounded by the call's own reserved sleep (it must hear it before it
//! would have been sent).

use redis_throttle::prelude::*;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis_throttle::{
    Announcements, Backend, Error, Grant, Limiter, MetricsSnapshot, MultiLimiter, Quota, Rate,
};
use throttle_e2e::{
    assert_granted_after_the_pause, multiplexed, pause_a_reserved_call, runtime, serial,
    server_for, PausedCall,
};
use throttle_testkit::Flavor;
use tokio::task::JoinHandle;
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);
/// One token, one every 300 ms: a second call reserves and sleeps 300 ms.
const INTERVAL: Duration = Duration::from_millis(300);
const PAUSE: Duration = Duration::from_millis(1000);

fn quota() -> Quota {
    Quota::new(1, Rate::per(1, INTERVAL)).unwrap()
}

fn subscription(url: &str) -> Announcements {
    Announcements::new(redis::Client::open(url).unwrap()).unwrap()
}

/// A limiter on `key` over the backend, on a connection of its own, listening to `listen` if
/// given.
async fn limiter(
    url: &str,
    key: &str,
    backend: Backend,
    listen: Option<&Announcements>,
) -> Limiter<MultiplexedConnection> {
    let builder = Limiter::builder(key, quota()).backend(backend);
    let builder = match listen {
        Some(announcements) => builder.listen(announcements),
        None => builder,
    };
    builder.build(multiplexed(url).await).unwrap()
}

/// Waits (10 s at most) until each subscription is up.
async fn assert_subscribed(subscriptions: &[&Announcements], at: &str) {
    for subscribed in subscriptions {
        assert!(
            subscribed.ready(Duration::from_secs(10)).await,
            "{at} subscribed"
        );
    }
}

/// A second take of `caller`'s, on a task of its own: with one token, it reserves and sleeps.
fn spawn_reserved(caller: &Limiter<MultiplexedConnection>) -> JoinHandle<Result<Grant, Error>> {
    let caller = caller.clone();
    tokio::spawn(async move { caller.acquire().await })
}

/// What a reserved call that heard a pause did: held back once, confirmed what it heard with
/// the server, looked nowhere after its sleep, and was granted after the pause (set `sent`
/// after `start`) ended, in the take, the confirmation and the take after the pause.
fn assert_heard_and_held_past_the_pause(
    metrics: &MetricsSnapshot,
    grant: &Grant,
    start: Instant,
    sent: Duration,
    at: &str,
) {
    assert_eq!(metrics.pushback.held_by_pause, 1, "{at}");
    assert_eq!(
        metrics.pushback.pause_checks, 0,
        "{at}: no look after the sleep while listening"
    );
    assert_eq!(
        metrics.pushback.pause_confirms, 1,
        "{at}: what was heard confirmed with the server, on the paused bucket"
    );
    assert_eq!(
        grant.round_trips, 3,
        "{at}: the take, the confirmation, and the take after the pause"
    );
    assert_granted_after_the_pause(start, sent, PAUSE, at);
}

/// Looks, as often as the runtime lets it, for at most `within`, until `done`; returns when it
/// first held, from `from`. Yields between looks rather than sleeping, so that the instant is
/// within microseconds of the change, not a timer's millisecond.
async fn when(from: Instant, within: Duration, done: impl Fn() -> bool) -> Option<Duration> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if done() {
            return Some(from.elapsed());
        }
        tokio::task::yield_now().await;
    }
    None
}

/// Two processes (each its connection and its subscription): the caller reserves and sleeps,
/// the other is told to pause by its supplier. The caller hears it at once, gives its
/// reservation back, sleeps out the pause and takes again: granted no earlier than the pause's
/// end, with one THROTTLE.TAKE before and one after, and no look.
fn a_pause_from_another_process_reaches_a_reserved_call(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    let url = server.url();
    runtime().block_on(async {
        let (mine, theirs) = (subscription(&url), subscription(&url));
        let key = format!("listen:{}", backend.name());
        let caller = limiter(&url, &key, backend, Some(&mine)).await;
        let other = limiter(&url, &key, backend, Some(&theirs)).await;
        assert_subscribed(&[&mine, &theirs], &flavor.to_string()).await;
        caller.acquire().await.unwrap();
        let start = Instant::now();
        let reserved = spawn_reserved(&caller);
        // The reservation is made at once (a round trip); the pause comes while it sleeps.
        tokio::time::sleep(MS * 50).await;
        let sent = start.elapsed();
        other.pause(PAUSE).await.unwrap();
        let trip = start.elapsed() - sent;
        // Heard within the trip that set it, and the time this test takes to look (the
        // machine decides both): before the call's reserved send, which is what counts.
        let heard = when(start, INTERVAL, || {
            caller.metrics().pushback.heard_pauses == 1
        })
        .await;
        let grant = reserved.await.unwrap().unwrap();
        let metrics = caller.metrics();
        let at = format!("{flavor} {backend:?}");
        let heard = heard.unwrap_or_else(|| panic!("{at}: not heard before the reserved send"));
        assert_heard_and_held_past_the_pause(&metrics, &grant, start, sent, &at);
        println!(
            "{at}: pause sent at {sent:?}, its round trip {trip:?}; heard at {heard:?} \
             ({:?} after the pause was sent)",
            heard.saturating_sub(sent)
        );
    });
}

/// The caller's subscription is killed while a call of its sleeps: that call cannot count on
/// having heard everything, so it asks (one look), and a pause set meanwhile holds it back
/// all the same. The subscription comes back by itself, and the next reserved call does not
/// ask.
fn a_killed_subscription_asks_until_it_is_back(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    let url = server.url();
    runtime().block_on(async {
        let mine = subscription(&url);
        let key = format!("killed:{}", backend.name());
        let caller = limiter(&url, &key, backend, Some(&mine)).await;
        let other = limiter(&url, &key, backend, None).await;
        assert_subscribed(&[&mine], &flavor.to_string()).await;
        let at = format!("{flavor} {backend:?}");
        caller.acquire().await.unwrap();
        let start = Instant::now();
        let reserved = spawn_reserved(&caller);
        tokio::time::sleep(MS * 20).await;
        let mut admin = server.conn();
        let killed: i64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query(&mut admin)
            .unwrap();
        assert_eq!(killed, 1, "{at}: the one subscription");
        let killed_at = Instant::now();
        let back = tokio::spawn({
            let mine = mine.clone();
            async move {
                let back = |mine: &Announcements| mine.reconnects() == 1 && mine.is_listening();
                let mut looks = 0;
                while !back(&mine) && looks < 10_000 {
                    tokio::time::sleep(MS).await;
                    looks += 1;
                }
                back(&mine).then(|| killed_at.elapsed())
            }
        });
        let sent = start.elapsed();
        other.pause(PAUSE).await.unwrap();
        let grant = reserved.await.unwrap().unwrap();
        let metrics = caller.metrics();
        assert_eq!(
            metrics.pushback.held_by_pause, 1,
            "{at}: held back all the same"
        );
        assert_granted_after_the_pause(start, sent, PAUSE, &at);
        // Heard on the new subscription (if it was back in time) or asked: either way not
        // sent into the pause. It asked unless it heard.
        let (heard, asked) = (metrics.pushback.heard_pauses, metrics.pushback.pause_checks);
        assert_eq!(heard + asked, 1, "{at}: {metrics:?}");
        assert!(grant.round_trips >= 2, "{at}");
        // Back by itself, and listened to again.
        let back = back.await.unwrap();
        let back = back.unwrap_or_else(|| panic!("{at}: not back within 10 s"));
        assert!(
            mine.ready(Duration::from_secs(10)).await,
            "{at}: subscribed again"
        );
        println!(
            "{at}: heard {heard}, asked {asked}; the subscription back {back:?} after the kill"
        );
        let checks = caller.metrics().pushback.pause_checks;
        let grant = caller.acquire().await.unwrap();
        assert!(
            !grant.slept.is_zero(),
            "{at}: reserved behind the last grant"
        );
        assert_eq!(grant.round_trips, 1, "{at}: no look once back");
        assert_eq!(caller.metrics().pushback.pause_checks, checks, "{at}");
    });
}

/// A `MultiLimiter` listens to each of its buckets: a pause on the second one alone, set by
/// another process, wakes the reserved call; it is granted after the pause, in one MTAKE
/// before and one after, with no look at either bucket.
fn a_pause_on_one_of_several_buckets_reaches_a_reserved_call(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    let url = server.url();
    runtime().block_on(async {
        let (mine, theirs) = (subscription(&url), subscription(&url));
        let tag = format!("{{multi:{}}}", backend.name());
        let (first, second) = (format!("{tag}:s"), format!("{tag}:m"));
        let caller = MultiLimiter::builder()
            .limit(&first, Quota::new(5, 100u64).unwrap(), 1)
            .limit(&second, quota(), 1)
            .backend(backend)
            .listen(&mine)
            .build(multiplexed(&url).await)
            .unwrap();
        let other = limiter(&url, &second, backend, Some(&theirs)).await;
        assert_subscribed(&[&mine, &theirs], &flavor.to_string()).await;
        caller.acquire().await.unwrap();
        let PausedCall { grant, sent, start } = pause_a_reserved_call(&caller, &other, PAUSE).await;
        let metrics = caller.metrics();
        let at = format!("{flavor} {backend:?}");
        assert_eq!(metrics.pushback.heard_pauses, 1, "{at}: heard");
        assert_heard_and_held_past_the_pause(&metrics, &grant, start, sent, &at);
    });
}

/// What is heard is a hint. Messages on the quota's channel from anyone who may publish there:
/// those no server could send (the hostile trial's freeze, `86400000 <u64::MAX> 10000`, and
/// its forged cut) are dropped unread; one in range (a day's pause, a cut) is put to the server,
/// which does not confirm it, and the reserved call goes at its time. An honest pause longer
/// than what is left of the call's `max_wait` fails it at once, naming the pause, instead of
/// holding it past its deadline.
fn what_is_heard_is_a_hint_and_no_pause_outlives_a_deadline(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    let url = server.url();
    runtime().block_on(async {
        let mine = subscription(&url);
        let key = format!("forged:{}", backend.name());
        let max_wait = Duration::from_secs(3);
        let caller = Limiter::builder(&key, quota())
            .backend(backend)
            .listen(&mine)
            .max_wait(max_wait)
            .build(multiplexed(&url).await)
            .unwrap();
        let other = limiter(&url, &key, backend, None).await;
        assert_subscribed(&[&mine], &flavor.to_string()).await;
        let at = format!("{flavor} {backend:?}");
        let mut admin = server.conn();
        let channel = format!("throttle:pause:{{{key}}}");
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros();
        let in_a_minute = now_us + 60_000_000;
        let forgeries = [
            "86400000 18446744073709551615 10000".to_owned(),
            "1 18446744073709551615 5000".to_owned(),
            format!("86400000 {in_a_minute} 10000"),
            format!("1 {in_a_minute} 5000"),
        ];
        caller.acquire().await.unwrap();
        for (round, forged) in forgeries.iter().enumerate() {
            let start = Instant::now();
            let reserved = spawn_reserved(&caller);
            tokio::time::sleep(MS * 50).await;
            let heard: i64 = redis::cmd("SPUBLISH")
                .arg(&channel)
                .arg(forged)
                .query(&mut admin)
                .unwrap();
            assert_eq!(heard, 1, "{at}: the one subscription");
            let grant = reserved.await.unwrap().unwrap_or_else(|err| {
                panic!("{at}: {forged:?} made the reserved call fail: {err}")
            });
            let took = start.elapsed();
            // The server decides the grant: one reservation, slept to its time.
            assert!(!grant.slept.is_zero(), "{at}: {forged:?}: reserved");
            assert!(
                took < INTERVAL * 4,
                "{at}: {forged:?}: granted only after {took:?}"
            );
            let metrics = caller.metrics();
            assert_eq!(metrics.pushback.held_by_pause, 0, "{at}: {forged:?}");
            // The first two are dropped unread; each later one is put to the server once.
            let put = u64::try_from(round.saturating_sub(1)).unwrap();
            assert_eq!(metrics.pushback.unconfirmed, put, "{at}: {forged:?}");
            assert_eq!(metrics.pushback.pause_confirms, put, "{at}: {forged:?}");
            assert_eq!(
                grant.round_trips,
                if round < 2 { 1 } else { 2 },
                "{at}: {forged:?}: the take (and the confirmation)"
            );
        }
        assert_eq!(mine.dropped(), 2, "{at}: the two out of range");

        // An honest pause of 8 s against a call that may wait 3 s: it fails when it hears it.
        let start = Instant::now();
        let reserved = spawn_reserved(&caller);
        tokio::time::sleep(MS * 50).await;
        other.pause(Duration::from_secs(8)).await.unwrap();
        let failed = reserved.await.unwrap();
        let took = start.elapsed();
        match failed {
            Err(redis_throttle::Error::DeadlineExceeded {
                needed: Some(needed),
                deadline,
                paused: true,
            }) => {
                assert_eq!(deadline, max_wait, "{at}");
                assert!(
                    needed > Duration::from_secs(7) && needed <= Duration::from_secs(8),
                    "{at}: the pause's rest, the server's: {needed:?}"
                );
            }
            other => panic!("{at}: {other:?}"),
        }
        // At once: before the reservation's own send, not at the pause's end.
        assert!(took < INTERVAL, "{at}: failed after {took:?}");
        println!("{at}: the honest pause failed the call after {took:?}");
    });
}

/// Listening is the default: a limiter built over `redis_throttle::connect`'s connection hears
/// a pause another process sets, with no look after its sleep, without being told to listen;
/// one built with `without_listening()` asks instead.
fn a_limiter_over_connect_listens_by_default(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    let url = server.url();
    runtime().block_on(async {
        let conn = redis_throttle::connect(&url).await.unwrap();
        let at = format!("{flavor} {backend:?}");
        for listens in [true, false] {
            let key = format!("default:{}:{listens}", backend.name());
            let builder = Limiter::builder(&key, quota()).backend(backend);
            let caller = if listens {
                builder.build(conn.clone()).unwrap()
            } else {
                builder.without_listening().build(conn.clone()).unwrap()
            };
            let other = limiter(&url, &key, backend, None).await;
            assert!(
                conn.announcements().ready(Duration::from_secs(10)).await,
                "{at}: subscribed"
            );
            caller.acquire().await.unwrap();
            let PausedCall { sent, start, .. } =
                pause_a_reserved_call(&caller, &other, PAUSE).await;
            assert_granted_after_the_pause(start, sent, PAUSE, &at);
            let pushback = caller.metrics().pushback;
            assert_eq!(pushback.held_by_pause, 1, "{at} {listens}");
            assert_eq!(
                (pushback.heard_pauses, pushback.pause_checks),
                if listens { (1, 0) } else { (0, 1) },
                "{at}: heard by default, asked when told not to listen"
            );
        }
    });
}

const TRUST_MODEL: &str = include_str!("../../docs/trust-model.md");

/// The documented ACL line of a listening process's subscription: a user with it listens (no
/// look after a reserved sleep), one without the channel is refused it and asks instead.
fn the_documented_acl_line_listens(flavor: Flavor, backend: Backend) {
    let _serial = serial();
    let server = server_for(flavor, backend);
    let heading = "# the subscription of a process that listens to pause announcements";
    let mut lines = TRUST_MODEL.lines();
    lines
        .find(|l| *l == heading)
        .expect("the line's heading in docs/trust-model.md");
    let line = lines.next().expect("the ACL line under it");
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[..3], ["ACL", "SETUSER", "throttle-listen"], "{line}");
    let mut admin = server.conn();
    let _: () = redis::cmd("ACL")
        .arg(&words[1..])
        .query(&mut admin)
        .unwrap();
    // The same rules without the channel.
    let deaf: Vec<&str> = words[1..]
        .iter()
        .map(|w| {
            if *w == "throttle-listen" {
                "throttle-deaf"
            } else {
                w
            }
        })
        .filter(|w| !w.starts_with('&'))
        .collect();
    let _: () = redis::cmd("ACL").arg(&deaf).query(&mut admin).unwrap();
    let as_user = |user: &str| {
        let info = redis::Client::open(server.url())
            .unwrap()
            .get_connection_info()
            .clone();
        let settings = info
            .redis_settings()
            .clone()
            .set_username(user)
            .set_password("secret");
        redis::Client::open(info.set_redis_settings(settings)).unwrap()
    };
    runtime().block_on(async {
        for (user, listens) in [("throttle-listen", true), ("throttle-deaf", false)] {
            let announcements = Announcements::new(as_user(user)).unwrap();
            // A key of the documented pattern (quota:*): the line's channels are its keys'.
            let key = format!("quota:acl:{user}");
            let limiter = limiter(&server.url(), &key, backend, Some(&announcements)).await;
            let ready = announcements.ready(Duration::from_secs(if listens { 10 } else { 1 }));
            assert_eq!(ready.await, listens, "{flavor} {user}");
            limiter.acquire().await.unwrap();
            let grant = limiter.acquire().await.unwrap();
            assert!(!grant.slept.is_zero(), "{flavor} {user}: reserved");
            let asked = limiter.metrics().pushback.pause_checks;
            assert_eq!(asked, u64::from(!listens), "{flavor} {user}");
        }
    });
}

mod per_backend;

per_backend::backends!(
    a_pause_from_another_process_reaches_a_reserved_call => heard_module(Module),
    a_pause_from_another_process_reaches_a_reserved_call => heard_library(Library),
    a_pause_from_another_process_reaches_a_reserved_call => heard_script(Script),
    a_killed_subscription_asks_until_it_is_back => killed_module(Module),
    a_killed_subscription_asks_until_it_is_back => killed_script(Script),
    the_documented_acl_line_listens => acl_module(Module),
    a_pause_on_one_of_several_buckets_reaches_a_reserved_call => multi_module(Module),
    a_pause_on_one_of_several_buckets_reaches_a_reserved_call => multi_library(Library),
    what_is_heard_is_a_hint_and_no_pause_outlives_a_deadline => hint_module(Module),
    what_is_heard_is_a_hint_and_no_pause_outlives_a_deadline => hint_library(Library),
    what_is_heard_is_a_hint_and_no_pause_outlives_a_deadline => hint_script(Script),
    a_limiter_over_connect_listens_by_default => default_module(Module),
    a_limiter_over_connect_listens_by_default => default_library(Library),
);

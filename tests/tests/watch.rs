//! The module writes a bucket in place through the key API, not with a SET run inside Redis;
//! what a client's SET does besides storing, a write does too: it invalidates WATCH and fires
//! the `set` and `expire` keyspace events. A call that writes nothing (a denial, `TOKENS 0`)
//! does neither.

use std::time::Duration;

use throttle_e2e::{per_server, query, take, Connection, Flavor, Server, Value};

per_server!(watch_sees_writes_only, keyspace_events_for_writes_only);

/// `WATCH key`, then `call` on another connection, then a transaction: `true` if EXEC ran it.
fn exec_survives(watcher: &mut Connection, key: &str, call: impl FnOnce()) -> bool {
    let _: () = query(watcher, redis::cmd("WATCH").arg(key));
    call();
    let _: () = query(watcher, &redis::cmd("MULTI"));
    let queued: String = query(watcher, redis::cmd("SET").arg("watch:other").arg(1));
    assert_eq!(queued, "QUEUED");
    match query::<Value>(watcher, &redis::cmd("EXEC")) {
        Value::Array(replies) => {
            assert_eq!(replies.len(), 1, "{replies:?}");
            true
        }
        Value::Nil => false,
        other => panic!("EXEC replied {other:?}"),
    }
}

fn watch_sees_writes_only(flavor: Flavor) {
    let server = Server::start(flavor);
    let (mut watcher, mut con) = (server.conn(), server.conn());
    // One token per 1000 s: after the first take, every take is a denial.
    assert_eq!(take(&mut con, "w", "1 0.001")[0], 1);
    let denied = exec_survives(&mut watcher, "w", || {
        assert_eq!(take(&mut con, "w", "1 0.001")[..2], [0, 0]);
    });
    assert!(denied, "{flavor}: a denial invalidated WATCH");
    let peeked = exec_survives(&mut watcher, "w", || {
        assert_eq!(take(&mut con, "w", "1 0.001 TOKENS 0")[..2], [1, 0]);
    });
    assert!(peeked, "{flavor}: TOKENS 0 invalidated WATCH");
    let reserved = exec_survives(&mut watcher, "w", || {
        assert_eq!(take(&mut con, "w", "1 0.001 MAXWAIT 100000000")[0], 1);
    });
    assert!(
        !reserved,
        "{flavor}: a reservation wrote without invalidating WATCH"
    );
}

fn keyspace_events_for_writes_only(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    let _: () = query(
        &mut con,
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg("KA"),
    );
    let mut subscriber = server.conn();
    subscriber
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("read timeout");
    let mut pubsub = subscriber.as_pubsub();
    pubsub.psubscribe("__keyspace@0__:ev*").expect("PSUBSCRIBE");

    // A denial, a grant, a denial, then a marker key: the events arrive in order, so anything
    // a denial fired would show up before the marker's.
    assert_eq!(take(&mut con, "ev", "1 0.001")[0], 1);
    let _: i64 = query(&mut con, redis::cmd("DEL").arg("ev"));
    assert_eq!(take(&mut con, "ev", "1 0.001 TOKENS 1")[0], 1);
    assert_eq!(take(&mut con, "ev", "1 0.001")[0], 0);
    let _: () = query(&mut con, redis::cmd("SET").arg("ev:marker").arg(1));

    let mut events = Vec::new();
    for _ in 0..6 {
        let message = pubsub.get_message().expect("a keyspace event within 10 s");
        let key = message
            .get_channel_name()
            .trim_start_matches("__keyspace@0__:")
            .to_owned();
        let event: String = message.get_payload().expect("the event's name");
        events.push(format!("{key} {event}"));
        if key == "ev:marker" {
            break;
        }
    }
    assert_eq!(
        events,
        [
            "ev set",
            "ev expire",
            "ev del",
            "ev set",
            "ev expire",
            "ev:marker set"
        ],
        "{flavor}: the events of a take, a DEL, a take and a denial"
    );
}

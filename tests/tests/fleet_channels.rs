//! Each fleet's pause channels are its own, with the ACL lines docs/trust-model.md gives (read
//! from the file): fleets A (`~quota:a:*`) and B (`~quota:b:*`), each made with the documented
//! fleet line of the script and of the library, its channel patterns made from its key
//! pattern as the doc says:
//! - A may `SPUBLISH` on the channels of its own keys (with and without a hash tag), and is
//!   refused (`NOPERM`) `SPUBLISH` on B's, and `PUBLISH` on B's even when given `+publish`;
//! - A's pause through the library announces on its own key's channel (the library's own
//!   `SPUBLISH`, as A), and A cannot pause B's key;
//! - the documented subscription line, made for A, may `SSUBSCRIBE` to A's channels and is
//!   refused B's.

use redis_throttle::script::LIBRARY;
use throttle_bucket::pause_channel;
use throttle_e2e::acl::{documented, login};
use throttle_e2e::{line, query, send, server_for, Connection, Value};
use throttle_testkit::Flavor;

const TRUST_MODEL: &str = include_str!("../../docs/trust-model.md");

const SCRIPT_FLEET: &str = "script (EVALSHA), the fleet";
const LIBRARY_FLEET: &str = "function library (FCALL), the fleet (the library loaded by the admin)";
const LISTEN: &str = "the subscription of a process that listens to pause announcements";

fn channel(key: &str) -> Vec<u8> {
    pause_channel(key.as_bytes())
}

/// `command` on `key`'s channel must be refused for the channel.
#[track_caller]
fn assert_channel_refused(con: &mut Connection, command: &str, key: &str, who: &str) {
    let error = send(con, redis::cmd(command).arg(channel(key)).arg("1 0 10000"))
        .expect_err(&format!("{who}: {command} on the channel of {key}"));
    assert!(
        error.starts_with("NOPERM ") && error.contains("channel"),
        "{who}: {command} {key}: {error}"
    );
}

/// The fleets' lines of `comment`: A's user may publish on its keys' channels alone.
fn a_fleet_publishes_on_its_own_channels_alone(flavor: Flavor, comment: &str) {
    let server = server_for(flavor, redis_throttle::Backend::Library);
    let mut admin = server.conn();
    for (user, keys) in [("fleet-a", "quota:a:*"), ("fleet-b", "quota:b:*")] {
        let rules = documented(TRUST_MODEL, comment, user, keys);
        let _: () = query(&mut admin, redis::cmd("ACL").arg("SETUSER").arg(&rules));
    }
    let mut a = login(&server, "fleet-a");
    for own in ["quota:a:x", "quota:a:{tenant}:x", "quota:a:x y"] {
        let reply = send(
            &mut a,
            redis::cmd("SPUBLISH").arg(channel(own)).arg("1 0 10000"),
        );
        assert_eq!(
            reply,
            Ok(Value::Int(0)),
            "{flavor} {comment}: SPUBLISH {own}"
        );
    }
    for other in ["quota:b:x", "quota:b:{tenant}:x", "quota:other"] {
        assert_channel_refused(&mut a, "SPUBLISH", other, &format!("{flavor} {comment}"));
    }
    // PUBLISH is no command of the line; given it, B's channels are still refused.
    let error = send(
        &mut a,
        redis::cmd("PUBLISH").arg(channel("quota:b:x")).arg("1"),
    )
    .expect_err("PUBLISH");
    assert!(error.starts_with("NOPERM "), "{flavor}: {error}");
    let _: () = query(&mut admin, &line("ACL SETUSER fleet-a +publish"));
    assert_channel_refused(
        &mut a,
        "PUBLISH",
        "quota:b:x",
        &format!("{flavor} {comment}"),
    );
    assert_eq!(
        send(
            &mut a,
            redis::cmd("PUBLISH").arg(channel("quota:a:x")).arg("1")
        ),
        Ok(Value::Int(0)),
        "{flavor}"
    );
}

fn the_scripts_fleet_lines(flavor: Flavor) {
    a_fleet_publishes_on_its_own_channels_alone(flavor, SCRIPT_FLEET);
}

fn the_librarys_fleet_lines(flavor: Flavor) {
    a_fleet_publishes_on_its_own_channels_alone(flavor, LIBRARY_FLEET);
}

/// Through the library (loaded by the admin), A's pause of its own key is announced on that
/// key's channel (heard by A's own subscription, made with the documented line), and A
/// cannot pause B's key.
fn the_librarys_pause_announces_on_the_fleets_channel(flavor: Flavor) {
    let server = server_for(flavor, redis_throttle::Backend::Library);
    let mut admin = server.conn();
    let loaded = send(
        &mut admin,
        redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(LIBRARY),
    );
    assert_eq!(loaded, Ok(Value::BulkString(b"throttle".to_vec())));
    for (user, comment, keys) in [
        ("fleet-a", LIBRARY_FLEET, "quota:a:*"),
        ("listen-a", LISTEN, "quota:a:*"),
    ] {
        let rules = documented(TRUST_MODEL, comment, user, keys);
        let _: () = query(&mut admin, redis::cmd("ACL").arg("SETUSER").arg(&rules));
    }
    let mut listener = login(&server, "listen-a");
    let reply: Value = query(
        &mut listener,
        redis::cmd("SSUBSCRIBE").arg(channel("quota:a:x")),
    );
    assert!(
        matches!(&reply, Value::Array(words) if words.len() == 3),
        "{flavor}: {reply:?}"
    );
    let mut a = login(&server, "fleet-a");
    let paused = send(&mut a, &line("FCALL throttle_pause 1 quota:a:x 5 1 60000"));
    assert!(paused.is_ok(), "{flavor}: {paused:?}");
    // The announcement, as the subscription reads it: ["smessage", channel, message].
    listener
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let heard: Value = listener.recv_response().expect("the announcement");
    let Value::Array(words) = heard else {
        panic!("{flavor}: {heard:?}");
    };
    assert_eq!(
        words[0],
        Value::BulkString(b"smessage".to_vec()),
        "{flavor}"
    );
    assert_eq!(
        words[1],
        Value::BulkString(channel("quota:a:x")),
        "{flavor}"
    );
    let refused = send(&mut a, &line("FCALL throttle_pause 1 quota:b:x 5 1 60000"))
        .expect_err("A paused B's key");
    assert!(refused.starts_with("NOPERM "), "{flavor}: {refused}");
}

/// The documented subscription line, made for A, hears A's channels and is refused B's.
fn the_subscription_line_hears_its_fleet_alone(flavor: Flavor) {
    let server = server_for(flavor, redis_throttle::Backend::Library);
    let mut admin = server.conn();
    let rules = documented(TRUST_MODEL, LISTEN, "listen-a", "quota:a:*");
    let _: () = query(&mut admin, redis::cmd("ACL").arg("SETUSER").arg(&rules));
    for other in ["quota:b:x", "quota:b:{tenant}:x"] {
        let mut con = login(&server, "listen-a");
        assert_channel_refused_subscribe(&mut con, other, flavor);
    }
    for own in ["quota:a:x", "quota:a:{tenant}:x"] {
        let mut con = login(&server, "listen-a");
        let reply = send(&mut con, redis::cmd("SSUBSCRIBE").arg(channel(own)));
        assert!(
            matches!(&reply, Ok(Value::Array(words)) if words.len() == 3),
            "{flavor}: SSUBSCRIBE {own}: {reply:?}"
        );
    }
}

#[track_caller]
fn assert_channel_refused_subscribe(con: &mut Connection, key: &str, flavor: Flavor) {
    let error = send(con, redis::cmd("SSUBSCRIBE").arg(channel(key)))
        .expect_err(&format!("{flavor}: SSUBSCRIBE {key}"));
    assert!(
        error.starts_with("NOPERM ") && error.contains("channel"),
        "{flavor}: SSUBSCRIBE {key}: {error}"
    );
}

throttle_testkit::per_server!(
    the_scripts_fleet_lines,
    the_librarys_fleet_lines,
    the_librarys_pause_announces_on_the_fleets_channel,
    the_subscription_line_hears_its_fleet_alone,
);

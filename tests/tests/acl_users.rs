//! ACL users, beyond what `acl.rs` checks (NOPERM for `+@all -throttle.take` on all four
//! servers, and for `-@write` where the server can give module commands categories):
//! - a user with `+@write` and nothing else can run THROTTLE.TAKE (and not GET) where the
//!   module has its categories; `+@fast` likewise;
//! - on Redis 7.0 module commands have no category at all, so neither `+@write` grants it nor
//!   `-@write` denies it: there it is granted and denied by name, which works everywhere;
//! - key patterns apply to the key THROTTLE.TAKE declares (key 1): a user limited to
//!   `~allowed:*` cannot take from another key, and the refusal is in `ACL LOG`;
//! - the key is declared read-write (it reads the bucket and writes the new state), so a
//!   user with only read (`%R~`) or only write (`%W~`) access to the key is refused.

use throttle_e2e::{as_reply, conn_as, exists, line, per_server, query, send, Connection, Value};
use throttle_testkit::{Flavor, Server};

fn set_user(admin: &mut Connection, rules: &[&str]) {
    let _: () = query(admin, redis::cmd("ACL").arg("SETUSER").arg(rules));
}

/// THROTTLE.TAKE as this user must be refused by command name, and write nothing.
#[track_caller]
fn assert_command_denied(con: &mut Connection, admin: &mut Connection, key: &str, who: &str) {
    let error = send(con, &line(&format!("THROTTLE.TAKE {key} 8 9"))).expect_err(who);
    assert!(error.starts_with("NOPERM "), "{who}: {error}");
    assert!(
        error.to_lowercase().contains("throttle.take"),
        "{who}: the refusal names the command: {error}"
    );
    assert!(!exists(admin, key), "{who}: a refused call wrote {key}");
}

/// THROTTLE.TAKE as this user must be refused for the key, and write nothing.
#[track_caller]
fn assert_key_denied(con: &mut Connection, admin: &mut Connection, key: &str, who: &str) {
    let error = send(con, &line(&format!("THROTTLE.TAKE {key} 8 9"))).expect_err(who);
    assert!(error.starts_with("NOPERM "), "{who}: {error}");
    assert!(!exists(admin, key), "{who}: a refused call wrote {key}");
}

/// THROTTLE.TAKE as this user on a fresh key must be granted.
#[track_caller]
fn assert_allowed(con: &mut Connection, key: &str, who: &str) {
    let reply = send(con, &line(&format!("THROTTLE.TAKE {key} 8 9")))
        .unwrap_or_else(|e| panic!("{who} must be allowed THROTTLE.TAKE {key}: {e}"));
    assert_eq!(as_reply(&reply), [1, 7, 0, 112], "{who}");
}

fn write_and_fast_categories(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut admin = server.conn();
    set_user(
        &mut admin,
        &[
            "writer",
            "on",
            "nopass",
            "~*",
            "resetchannels",
            "-@all",
            "+@write",
        ],
    );
    set_user(
        &mut admin,
        &[
            "fast",
            "on",
            "nopass",
            "~*",
            "resetchannels",
            "-@all",
            "+@fast",
        ],
    );
    let mut writer = conn_as(&server, "writer");
    let mut fast = conn_as(&server, "fast");

    if flavor.has_acl_categories() {
        // The module gives THROTTLE.TAKE `@write @fast` (RedisModule_SetCommandACLCategories,
        // Redis 7.2+ and Valkey): each category alone lets a user run it.
        assert_allowed(&mut writer, "acl:writer", "+@write");
        assert_allowed(&mut fast, "acl:fast", "+@fast");
        // ... and +@write is all the writer has: GET is @read.
        let get = send(&mut writer, redis::cmd("GET").arg("acl:writer"));
        assert!(
            get.as_ref().is_err_and(|e| e.starts_with("NOPERM ")),
            "+@write alone must not allow GET: {get:?}"
        );
    } else {
        // Redis 7.0 has no API to give a module command an ACL category (it came in 7.2),
        // so THROTTLE.TAKE is in no category there: `+@write` does not grant it and
        // `-@write` does not deny it (acl.rs). Grant and deny it by name: `+throttle.take`,
        // `-throttle.take`, as module/README.md says ("Flags").
        assert_command_denied(&mut writer, &mut admin, "acl:writer", "7.0, +@write");
        assert_command_denied(&mut fast, &mut admin, "acl:fast", "7.0, +@fast");
    }

    // By name it works on every server.
    set_user(&mut admin, &["writer", "+throttle.take"]);
    assert_allowed(&mut writer, "acl:by-name", "+@write +throttle.take");
    set_user(&mut admin, &["writer", "-throttle.take"]);
    assert_command_denied(
        &mut writer,
        &mut admin,
        "acl:by-name-2",
        "+@write -throttle.take",
    );
}

/// The fields of the newest `ACL LOG` entry, as strings.
fn last_acl_log_entry(admin: &mut Connection) -> Vec<(String, String)> {
    let log: Value = query(admin, redis::cmd("ACL").arg("LOG").arg(1));
    let text = |value: &Value| match value {
        Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => format!("{other:?}"),
    };
    match &log {
        Value::Array(entries) => match entries.as_slice() {
            [Value::Array(fields)] => fields
                .chunks(2)
                .map(|pair| (text(&pair[0]), text(&pair[1])))
                .collect(),
            [Value::Map(fields)] => fields.iter().map(|(k, v)| (text(k), text(v))).collect(),
            _ => panic!("ACL LOG 1: {log:?}"),
        },
        _ => panic!("ACL LOG 1: {log:?}"),
    }
}

fn key_patterns(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut admin = server.conn();
    let _: () = query(&mut admin, redis::cmd("ACL").arg("LOG").arg("RESET"));

    // Only keys under allowed:*.
    set_user(
        &mut admin,
        &[
            "keyed",
            "on",
            "nopass",
            "~allowed:*",
            "-@all",
            "+throttle.take",
        ],
    );
    let mut keyed = conn_as(&server, "keyed");
    assert_allowed(&mut keyed, "allowed:x", "~allowed:*");
    assert_key_denied(&mut keyed, &mut admin, "other:x", "~allowed:* on other:x");
    let entry = last_acl_log_entry(&mut admin);
    let field = |name: &str| {
        entry
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(field("reason"), Some("key"), "{entry:?}");
    assert_eq!(field("object"), Some("other:x"), "{entry:?}");
    assert_eq!(field("username"), Some("keyed"), "{entry:?}");

    // The key is declared read-write (COMMAND INFO: RW access update): read-only or
    // write-only access to it is not enough ({flavor}: Redis 7.0 and later have %R~ / %W~).
    for (user, pattern) in [("reader", "%R~*"), ("blind-writer", "%W~*")] {
        set_user(
            &mut admin,
            &[user, "on", "nopass", pattern, "-@all", "+throttle.take"],
        );
        let mut con = conn_as(&server, user);
        assert_key_denied(
            &mut con,
            &mut admin,
            "acl:partial",
            &format!("{pattern} ({flavor})"),
        );
    }
}

per_server!(write_and_fast_categories, key_patterns);

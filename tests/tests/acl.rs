//! Command flags, key positions and ACL rules for THROTTLE.TAKE on every server.

use throttle_e2e::{
    as_reply, conn_as, exists, line, per_server, query, send, strings, Flavor, Server, Value,
};

per_server!(flags_keys_and_acl);

fn flags_keys_and_acl(flavor: Flavor) {
    check_flags_and_acl(&Server::start(flavor));
}

/// The same over a unix socket instead of TCP.
#[test]
fn flags_keys_and_acl_over_a_unix_socket() {
    check_flags_and_acl(&throttle_e2e::unix_socket_server(Flavor::Valkey91));
}

/// `COMMAND INFO`: flags write/denyoom/fast, key 1..1 step 1 (and the `@write @fast`
/// categories where the server can give module commands categories); `COMMAND GETKEYS`
/// finds the key; ACL rules by command name deny it everywhere, by category where the
/// server has categories for module commands.
fn check_flags_and_acl(server: &Server) {
    let flavor = server.flavor();
    let mut con = server.conn();

    let reply: Value = query(
        &mut con,
        redis::cmd("COMMAND").arg("INFO").arg("throttle.take"),
    );
    let Value::Array(commands) = &reply else {
        panic!("COMMAND INFO: {reply:?}");
    };
    let [Value::Array(info)] = commands.as_slice() else {
        panic!("COMMAND INFO throttle.take: {reply:?}");
    };
    assert!(info.len() >= 7, "COMMAND INFO throttle.take: {reply:?}");
    assert_eq!(
        info[0],
        Value::BulkString(b"throttle.take".to_vec()),
        "the command name"
    );
    let flags = strings(&info[2]);
    for flag in ["write", "denyoom", "fast"] {
        assert!(
            flags.iter().any(|f| f == flag),
            "flags {flags:?} lack {flag}"
        );
    }
    for flag in ["readonly", "noscript", "loading", "stale"] {
        assert!(
            !flags.iter().any(|f| f == flag),
            "flags {flags:?} include {flag}"
        );
    }
    assert_eq!(
        info[3..6],
        [Value::Int(1), Value::Int(1), Value::Int(1)],
        "first key, last key, step: {reply:?}"
    );
    let categories = strings(&info[6]);
    if flavor.has_acl_categories() {
        for category in ["@write", "@fast"] {
            assert!(
                categories.iter().any(|c| c == category),
                "ACL categories {categories:?} lack {category}"
            );
        }
    }

    let keys: Value = query(
        &mut con,
        redis::cmd("COMMAND")
            .arg("GETKEYS")
            .arg("THROTTLE.TAKE")
            .arg("acl:key")
            .arg(8)
            .arg(9)
            .arg("TOKENS")
            .arg(2),
    );
    assert_eq!(strings(&keys), ["acl:key"]);

    for rules in [
        ["nowrite", "on", "nopass", "~*", "+@all", "-@write"],
        ["notake", "on", "nopass", "~*", "+@all", "-throttle.take"],
    ] {
        let _: () = query(&mut con, redis::cmd("ACL").arg("SETUSER").arg(&rules[..]));
    }

    // `-@write`: SET is refused; THROTTLE.TAKE too where the module could declare @write.
    let mut nowrite = conn_as(server, "nowrite");
    let got: Option<String> = query(&mut nowrite, redis::cmd("GET").arg("acl:key"));
    assert_eq!(got, None);
    let set = send(&mut nowrite, redis::cmd("SET").arg("acl:key").arg(1));
    assert!(
        set.as_ref().is_err_and(|e| e.starts_with("NOPERM")),
        "{set:?}"
    );
    let taken = send(&mut nowrite, &line("THROTTLE.TAKE acl:key 8 9"));
    if flavor.has_acl_categories() {
        let error = taken.expect_err("-@write must deny THROTTLE.TAKE");
        assert!(error.starts_with("NOPERM "), "{error}");
        assert!(error.to_lowercase().contains("throttle.take"), "{error}");
        assert!(!exists(&mut con, "acl:key"), "a refused call wrote");
    } else {
        // Redis 7.0 has no API to give a module command a category: `-@write` does not
        // cover it there (module/README.md, "Flags").
        let reply = as_reply(&taken.expect("Redis 7.0: -@write does not name THROTTLE.TAKE"));
        assert_eq!(reply, [1, 7, 0, 112]);
        let _: i64 = query(&mut con, redis::cmd("DEL").arg("acl:key"));
    }

    // `-throttle.take`: refused by name on every server; other writes still allowed.
    let mut notake = conn_as(server, "notake");
    let error = send(&mut notake, &line("THROTTLE.TAKE acl:key 8 9")).expect_err("-throttle.take");
    assert!(error.starts_with("NOPERM "), "{error}");
    assert!(error.to_lowercase().contains("throttle.take"), "{error}");
    assert!(!exists(&mut con, "acl:key"), "a refused call wrote");
    let _: () = query(&mut notake, redis::cmd("SET").arg("acl:other").arg(1));

    let _: i64 = query(
        &mut con,
        redis::cmd("ACL")
            .arg("DELUSER")
            .arg("nowrite")
            .arg("notake"),
    );
}

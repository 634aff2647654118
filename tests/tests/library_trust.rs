//! Who may replace the shared function library, and what the client runs, with the ACL lines
//! docs/trust-model.md gives (read from the file, so the doc and the test cannot drift):
//! - the attack: a fleet user of `~quota:a:*` made with the documented fleet line is refused
//!   `FUNCTION LOAD REPLACE` of its own `throttle`, and fleet B's `FCALL throttle_take` still
//!   runs the real library (its exact replies); with `+function|load` added, as the line had
//!   it before, the same load succeeds and B's FCALL runs A's code (the attack is real), and
//!   then B's client refuses that library;
//! - a foreign library named `throttle` loaded by the admin line (the same version, a higher
//!   one, or none) is refused by the client with `Error::ForeignLibrary`, under `Library` and
//!   `Auto`, and none of its functions runs (no FCALL at all, no key written); one of an older
//!   version is replaced by a user that may load and refused to a fleet user;
//! - without a library, a fleet user gets `Error::LibraryNotLoaded` (`Backend::Library`), and
//!   `Auto` serves it from the script where the user is allowed EVALSHA; a user that may not
//!   run FUNCTION LIST gets `Error::LibraryNotVerified`, and `Auto` serves it from the script;
//! - the admin line loads the library, and the documented read-only and fleet library users
//!   peek and take through the client.

use redis_throttle::prelude::*;
use redis_throttle::script::{LIBRARY, LIBRARY_VERSION};
use redis_throttle::{Backend, Error, Limiter, Quota, TryAcquire};
use throttle_e2e::acl::{documented, login, PASSWORD};
use throttle_e2e::{
    as_reply, calls, exists, line, multiplexed, query, runtime, send, server_for, Connection, Value,
};
use throttle_testkit::{Flavor, Server};

const TRUST_MODEL: &str = include_str!("../../docs/trust-model.md");

const ADMIN_LINE: &str = "the administrator who loads the function library";
const LIBRARY_FLEET: &str = "function library (FCALL), the fleet (the library loaded by the admin)";
const LIBRARY_RO: &str =
    "function library (FCALL), read-only: peek (the library loaded by the admin)";
const SCRIPT_FLEET: &str = "script (EVALSHA), the fleet";

fn set_user(admin: &mut Connection, rules: &[String]) {
    let _: () = query(admin, redis::cmd("ACL").arg("SETUSER").arg(rules));
}

fn url_as(server: &Server, user: &str) -> String {
    server
        .url()
        .replacen("redis://", &format!("redis://{user}:{PASSWORD}@"), 1)
}

/// The fleets: A on `quota:a:*`, B on `quota:b:*`, each with the documented fleet line, and
/// the admin with the documented admin line.
fn fleets(server: &Server) -> Connection {
    let mut admin = server.conn();
    set_user(
        &mut admin,
        &documented(TRUST_MODEL, ADMIN_LINE, "throttle-admin", ""),
    );
    set_user(
        &mut admin,
        &documented(TRUST_MODEL, LIBRARY_FLEET, "fleet-a", "quota:a:*"),
    );
    set_user(
        &mut admin,
        &documented(TRUST_MODEL, LIBRARY_FLEET, "fleet-b", "quota:b:*"),
    );
    admin
}

/// A library named `throttle` that is not the client's: its take grants every time and
/// writes `quota:b:owned` (which fleet A may not write itself), as the hostile tester's did.
fn foreign_library(version: Option<u64>) -> String {
    let version = version.map_or(String::new(), |v| format!("local VERSION = {v} \n"));
    format!(
        "#!lua name=throttle\n{version}\
         redis.register_function('throttle_take', function(keys, args) \
           redis.call('SET', 'quota:b:owned', 'fleet A was here') \
           return {{1, 1, 0, 1000000}} end)\n\
         redis.register_function{{function_name='throttle_peek', flags={{'no-writes'}}, \
           callback=function(keys, args) return {{1, 1, 0, 0, 0, 10000}} end}}\n\
         redis.register_function{{function_name='throttle_version', flags={{'no-writes'}}, \
           callback=function(keys, args) return 999 end}}\n"
    )
}

/// The code of the server's `throttle` library, as the admin reads it (`None`: no library).
fn library_on(admin: &mut Connection) -> Option<Vec<u8>> {
    let reply: Value = query(admin, &line("FUNCTION LIST LIBRARYNAME throttle WITHCODE"));
    let Value::Array(libraries) = reply else {
        panic!("FUNCTION LIST: {reply:?}");
    };
    match libraries.as_slice() {
        [] => None,
        [Value::Array(fields)] => fields.chunks(2).find_map(|pair| match pair {
            [Value::BulkString(k), Value::BulkString(code)] if k == b"library_code" => {
                Some(code.clone())
            }
            _ => None,
        }),
        other => panic!("FUNCTION LIST: {other:?}"),
    }
}

fn load_as(con: &mut Connection, code: &str) -> Result<Value, String> {
    send(
        con,
        redis::cmd("FUNCTION").arg("LOAD").arg("REPLACE").arg(code),
    )
}

/// The server's refusal of `command` for lack of permission, on every flavor: `NOPERM`, and
/// the command named as the server names it.
#[track_caller]
fn assert_noperm(error: &str, command: &str) {
    assert!(error.starts_with("NOPERM "), "{error}");
    assert!(
        error.contains(&format!("'{command}' command")),
        "the refusal names {command}: {error}"
    );
}

fn quota() -> Quota {
    Quota::new(5, "0.001").unwrap()
}

/// One `try_acquire` on `key` as `user` through the client with `backend`: its result, and
/// the backend that served.
fn acquire_as(
    server: &Server,
    user: &str,
    key: &str,
    backend: Backend,
) -> (Result<TryAcquire, Error>, Backend) {
    runtime().block_on(async {
        let limiter = Limiter::builder(key, quota())
            .backend(backend)
            .pause_check(false)
            .build(multiplexed(&url_as(server, user)).await)
            .unwrap();
        let result = limiter.try_acquire().await;
        (result, limiter.backend())
    })
}

#[track_caller]
fn assert_granted(result: &Result<TryAcquire, Error>, remaining: u64, who: &str) {
    match result {
        Ok(TryAcquire::Granted(grant)) => assert_eq!(grant.remaining, remaining, "{who}"),
        other => panic!("{who}: {other:?}"),
    }
}

/// The attack, with the documented lines: refused at the load; with the load right it had
/// before, it works, and the client refuses the library it leaves.
fn a_fleet_user_cannot_replace_the_library(flavor: Flavor) {
    let server = server_for(flavor, Backend::Library);
    let mut admin = fleets(&server);
    let mut loader = login(&server, "throttle-admin");
    assert_eq!(
        load_as(&mut loader, LIBRARY),
        Ok(Value::BulkString(b"throttle".to_vec())),
        "{flavor}: the admin line loads the library"
    );
    let mut a = login(&server, "fleet-a");
    let mut b = login(&server, "fleet-b");
    let evil = foreign_library(Some(LIBRARY_VERSION + 1));

    let refused = load_as(&mut a, &evil).expect_err("fleet A must not load a library");
    assert_noperm(&refused, "function|load");
    assert_eq!(library_on(&mut admin).as_deref(), Some(LIBRARY.as_bytes()));
    // A cannot write B's keys itself either (refused for the key).
    let key_refused = send(&mut a, &line("SET quota:b:owned x")).expect_err("A wrote B's key");
    assert!(key_refused.starts_with("NOPERM "), "{key_refused}");
    assert!(!exists(&mut admin, "quota:b:owned"), "{flavor}");

    // B's calls run the real library: 1 of 5 tokens at one per 1000 s, then another.
    let take = "FCALL throttle_take 1 quota:b:x 5 0.001";
    let before_first = std::time::Instant::now();
    let first = send(&mut b, &line(take)).unwrap();
    assert_eq!(as_reply(&first), [1, 4, 0, 1_000_000], "{flavor}");
    let second = send(&mut b, &line(take)).unwrap();
    // Two tokens in debt, less the ms the machine took between the two takes: the server's
    // clock moved at most as far as ours did from before the first was sent to the second's
    // reply (a run on a loaded machine: 3 ms between them, 0 ms after the first reply).
    let between_ms = before_first.elapsed().as_millis() as i64 + 1;
    let second = as_reply(&second);
    assert_eq!(second[..3], [1, 3, 0], "{flavor}");
    assert!(
        (2_000_000 - between_ms..=2_000_000).contains(&second[3]),
        "{flavor}: reset {} ms, the two takes within {between_ms} ms",
        second[3]
    );
    assert!(!exists(&mut admin, "quota:b:owned"), "{flavor}");
    // And B's client, checking the library, takes from the same bucket.
    let (result, served) = acquire_as(&server, "fleet-b", "quota:b:x", Backend::Library);
    assert_granted(&result, 2, &format!("{flavor} B's client"));
    assert_eq!(served, Backend::Library);

    // The control: the fleet line as it was, with +function|load. The same load succeeds,
    // and B's FCALL runs A's code with B's permissions.
    set_user(
        &mut admin,
        &["fleet-a".to_owned(), "+function|load".to_owned()],
    );
    assert_eq!(
        load_as(&mut a, &evil),
        Ok(Value::BulkString(b"throttle".to_vec())),
        "{flavor}: with +function|load A replaces the library"
    );
    let hijacked = send(&mut b, &line(take)).unwrap();
    assert_eq!(
        as_reply(&hijacked),
        [1, 1, 0, 1_000_000],
        "{flavor}: A's code ran"
    );
    assert_eq!(
        query::<String>(&mut admin, &line("GET quota:b:owned")),
        "fleet A was here",
        "{flavor}: A's code wrote B's key as B"
    );
    // B's client refuses it, and runs none of it.
    let _: () = query(&mut admin, &line("DEL quota:b:owned"));
    let fcalls = calls(&mut admin, "fcall") + calls(&mut admin, "fcall_ro");
    let (result, _) = acquire_as(&server, "fleet-b", "quota:b:y", Backend::Library);
    assert!(
        matches!(
            result,
            Err(Error::ForeignLibrary { server_version: Some(v) }) if v == LIBRARY_VERSION + 1
        ),
        "{flavor}: {result:?}"
    );
    assert_eq!(
        calls(&mut admin, "fcall") + calls(&mut admin, "fcall_ro"),
        fcalls,
        "{flavor}: the client called no function"
    );
    assert!(!exists(&mut admin, "quota:b:owned"), "{flavor}");
    assert!(!exists(&mut admin, "quota:b:y"), "{flavor}");
}

/// An admin-loaded library named `throttle` that is not the client's: refused under
/// `Library` and `Auto` whatever version it says (unless older), and never run.
fn a_foreign_library_is_refused(flavor: Flavor) {
    let server = server_for(flavor, Backend::Library);
    let mut admin = fleets(&server);
    let mut loader = login(&server, "throttle-admin");
    for version in [Some(LIBRARY_VERSION), Some(LIBRARY_VERSION + 1), None] {
        let evil = foreign_library(version);
        assert_eq!(
            load_as(&mut loader, &evil),
            Ok(Value::BulkString(b"throttle".to_vec()))
        );
        for backend in [Backend::Library, Backend::Auto] {
            let who = format!("{flavor} {version:?} {backend:?}");
            let fcalls = calls(&mut admin, "fcall") + calls(&mut admin, "fcall_ro");
            let (result, served) = acquire_as(&server, "fleet-b", "quota:b:x", backend);
            match result {
                Err(Error::ForeignLibrary { server_version }) => {
                    assert_eq!(server_version, version, "{who}")
                }
                other => panic!("{who}: {other:?}"),
            }
            assert_eq!(served, backend, "{who}: nothing settled");
            assert_eq!(
                calls(&mut admin, "fcall") + calls(&mut admin, "fcall_ro"),
                fcalls,
                "{who}: the client called no function"
            );
            assert!(!exists(&mut admin, "quota:b:x"), "{who}");
            assert!(!exists(&mut admin, "quota:b:owned"), "{who}");
            assert_eq!(
                library_on(&mut admin),
                Some(evil.clone().into_bytes()),
                "{who}"
            );
        }
    }

    // Older by its version: a fleet user may not replace it (LibraryNotLoaded, and Auto has
    // no script here); a user that may load (the default user) replaces it with the
    // client's, which then serves.
    let older = foreign_library(Some(LIBRARY_VERSION - 1));
    assert_eq!(
        load_as(&mut loader, &older),
        Ok(Value::BulkString(b"throttle".to_vec()))
    );
    for backend in [Backend::Library, Backend::Auto] {
        let (result, _) = acquire_as(&server, "fleet-b", "quota:b:x", backend);
        match result {
            Err(Error::LibraryNotLoaded {
                server_version,
                server_message,
            }) => {
                assert_eq!(server_version, Some(LIBRARY_VERSION - 1), "{flavor}");
                assert_noperm(&server_message, "function|load");
            }
            other => panic!("{flavor} {backend:?}: {other:?}"),
        }
        assert!(!exists(&mut admin, "quota:b:x"), "{flavor}");
    }
    let (result, served) = acquire_as(&server, "default", "quota:b:x", Backend::Library);
    assert_granted(&result, 4, &format!("{flavor} the default user"));
    assert_eq!(served, Backend::Library);
    assert_eq!(library_on(&mut admin).as_deref(), Some(LIBRARY.as_bytes()));
    assert!(!exists(&mut admin, "quota:b:owned"), "{flavor}");
}

/// No library on the server: the fleet user cannot load it. `Library` says so; `Auto` serves
/// from the script where the user may run EVALSHA, else says the same.
fn no_library_and_no_right_to_load_it(flavor: Flavor) {
    let server = server_for(flavor, Backend::Library);
    let mut admin = fleets(&server);
    // The library user given the script's commands as well.
    let mut both = documented(TRUST_MODEL, LIBRARY_FLEET, "fleet-both", "quota:b:*");
    // (the script line's commands only: its `-@all` would reset the library's)
    let script = documented(TRUST_MODEL, SCRIPT_FLEET, "fleet-both", "quota:b:*");
    both.extend(script.into_iter().filter(|r| r.starts_with('+')));
    set_user(&mut admin, &both);
    set_user(
        &mut admin,
        &documented(TRUST_MODEL, SCRIPT_FLEET, "fleet-script", "quota:b:*"),
    );

    for backend in [Backend::Library, Backend::Auto] {
        let (result, served) = acquire_as(&server, "fleet-b", "quota:b:lib", backend);
        match result {
            Err(Error::LibraryNotLoaded {
                server_version: None,
                ref server_message,
            }) => assert_noperm(server_message, "function|load"),
            ref other => panic!("{flavor} {backend:?}: {other:?}"),
        }
        let text = result.unwrap_err().to_string();
        for needle in [
            "no redis-throttle function library",
            "FUNCTION LOAD REPLACE",
            "Backend::Script",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from {text}");
        }
        assert_eq!(served, backend, "{flavor}: nothing settled");
    }
    let (result, served) = acquire_as(&server, "fleet-both", "quota:b:both", Backend::Library);
    assert!(
        matches!(
            result,
            Err(Error::LibraryNotLoaded {
                server_version: None,
                ..
            })
        ),
        "{flavor}: {result:?}"
    );
    assert_eq!(served, Backend::Library);
    assert!(!exists(&mut admin, "quota:b:lib"), "{flavor}");
    assert!(!exists(&mut admin, "quota:b:both"), "{flavor}");

    // Auto: FUNCTION LOAD refused (fleet-both), or FUNCTION LIST refused (fleet-script):
    // the script serves.
    for user in ["fleet-both", "fleet-script"] {
        let (result, served) = acquire_as(&server, user, "quota:b:both", Backend::Auto);
        assert_granted(
            &result,
            if user == "fleet-both" { 4 } else { 3 },
            &format!("{flavor} {user}"),
        );
        assert_eq!(served, Backend::Script, "{flavor} {user}");
    }
    // The script-only user may not even read the library: Library says that.
    let (result, _) = acquire_as(&server, "fleet-script", "quota:b:script", Backend::Library);
    match result {
        Err(Error::LibraryNotVerified { server_message }) => {
            assert_noperm(&server_message, "function|list")
        }
        other => panic!("{flavor}: {other:?}"),
    }
    assert!(!exists(&mut admin, "quota:b:script"), "{flavor}");
    assert_eq!(library_on(&mut admin), None, "{flavor}: no one loaded it");
    assert_eq!(calls(&mut admin, "function|load"), 0, "{flavor}");
}

/// The documented library users, with the library the admin line loaded: the fleet takes,
/// the read-only user peeks (and may not take).
fn the_documented_library_users_work(flavor: Flavor) {
    let server = server_for(flavor, Backend::Library);
    let mut admin = fleets(&server);
    set_user(
        &mut admin,
        &documented(TRUST_MODEL, LIBRARY_RO, "fleet-ro", "quota:b:*"),
    );
    let mut loader = login(&server, "throttle-admin");
    assert_eq!(
        load_as(&mut loader, LIBRARY),
        Ok(Value::BulkString(b"throttle".to_vec()))
    );
    let (result, served) = acquire_as(&server, "fleet-b", "quota:b:x", Backend::Auto);
    assert_granted(&result, 4, &format!("{flavor} fleet-b"));
    assert_eq!(served, Backend::Library, "{flavor}");
    runtime().block_on(async {
        let limiter = Limiter::builder("quota:b:x", quota())
            .backend(Backend::Library)
            .build(multiplexed(&url_as(&server, "fleet-ro")).await)
            .unwrap();
        assert_eq!(limiter.peek().await.unwrap().remaining, 4, "{flavor}");
    });
    let mut ro = login(&server, "fleet-ro");
    assert_noperm(
        &send(&mut ro, &line("FCALL throttle_take 1 quota:b:x 5 0.001")).unwrap_err(),
        "fcall",
    );
    assert_noperm(&load_as(&mut ro, LIBRARY).unwrap_err(), "function|load");
}

throttle_testkit::per_server!(
    a_fleet_user_cannot_replace_the_library,
    a_foreign_library_is_refused,
    no_library_and_no_right_to_load_it,
    the_documented_library_users_work,
);

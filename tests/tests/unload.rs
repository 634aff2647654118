//! MODULE UNLOAD is refused, on every server. Unloading while a client has a module command
//! queued in MULTI (or held by CLIENT PAUSE WRITE) makes the server jump through the freed
//! command at EXEC (redis/redis#4826), so the module stays loaded until the server restarts:
//! the queued call then runs as usual, the server lives on, and its log says why.

use std::time::Duration;

use throttle_e2e::{
    ints, ok, per_server, process_id, run, within, Connection, Flavor, Server, Value,
};

fn text(value: &Value) -> String {
    match value {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::VerbatimString { text, .. } => text.clone(),
        other => format!("{other:?}"),
    }
}

/// The module is still listed and still answers.
#[track_caller]
fn assert_loaded(con: &mut Connection) {
    let modules = format!("{:?}", ok(con, "MODULE LIST"));
    assert!(modules.contains("throttle"), "MODULE LIST: {modules}");
}

#[track_caller]
fn assert_refused(con: &mut Connection) {
    let error = run(con, "MODULE UNLOAD throttle").expect_err("MODULE UNLOAD must be refused");
    assert!(
        error.starts_with("ERR ") && error.to_lowercase().contains("unload"),
        "{error}"
    );
}

const FULL: [i64; 4] = [1, 7, 0, 112];

fn refused_while_queued_in_multi(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut queued = server.conn();
    let mut admin = server.conn();
    let pid = process_id(&mut admin);

    assert_eq!(ok(&mut queued, "MULTI"), Value::Okay);
    assert_eq!(
        ok(&mut queued, "THROTTLE.TAKE multi 8 9"),
        Value::SimpleString("QUEUED".into())
    );
    assert_refused(&mut admin);
    assert_loaded(&mut admin);

    // EXEC runs the queued call as if nothing happened.
    let exec = ok(&mut queued, "EXEC");
    let Value::Array(replies) = &exec else {
        panic!("EXEC: {exec:?}");
    };
    assert_eq!(replies.len(), 1, "{exec:?}");
    assert_eq!(ints(&replies[0]), FULL, "{exec:?}");

    assert_eq!(ok(&mut admin, "PING"), Value::SimpleString("PONG".into()));
    assert_eq!(process_id(&mut admin), pid, "the server restarted");
    let log = server.log();
    let line = log
        .lines()
        .find(|l| l.contains("MODULE UNLOAD refused"))
        .unwrap_or_else(|| panic!("the log does not say why:\n{log}"));
    assert!(
        line.contains("MULTI") && line.contains("redis/redis#4826"),
        "{line}"
    );
    for bad in ["crashed by signal", "BUG REPORT", "ASSERTION FAILED"] {
        assert!(!log.contains(bad), "{bad}:\n{log}");
    }
}

fn refused_while_held_by_client_pause(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut admin = server.conn();
    let pid = process_id(&mut admin);

    assert_eq!(ok(&mut admin, "CLIENT PAUSE 20000 WRITE"), Value::Okay);
    let mut paused = server.conn();
    let held = std::thread::spawn(move || run(&mut paused, "THROTTLE.TAKE paused 8 9"));
    // Wait until the server holds the call (the client is blocked on it).
    within(
        "THROTTLE.TAKE to be held by CLIENT PAUSE WRITE (blocked: flags=b in CLIENT LIST)",
        Duration::from_secs(5),
        || {
            let clients = text(&ok(&mut admin, "CLIENT LIST"));
            clients
                .lines()
                .any(|l| {
                    l.contains("cmd=throttle.take")
                        && l.split(' ')
                            .any(|f| f.strip_prefix("flags=").is_some_and(|f| f.contains('b')))
                })
                .then_some(())
        },
    );

    assert_refused(&mut admin);
    assert_loaded(&mut admin);
    assert_eq!(ok(&mut admin, "CLIENT UNPAUSE"), Value::Okay);

    let reply = held
        .join()
        .expect("the paused client's thread")
        .expect("the held THROTTLE.TAKE");
    assert_eq!(ints(&reply), FULL);
    assert_eq!(ok(&mut admin, "PING"), Value::SimpleString("PONG".into()));
    assert_eq!(process_id(&mut admin), pid, "the server restarted");
}

per_server!(
    refused_while_queued_in_multi,
    refused_while_held_by_client_pause
);

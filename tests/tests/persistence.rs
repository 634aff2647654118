//! Bucket state survives every way Redis moves data, on every server: RDB (SAVE and restart),
//! AOF (kill -9 and restart; after BGREWRITEAOF with and without the RDB preamble; restart),
//! DEBUG RELOAD, DUMP/RESTORE and COPY. The AOF holds the resulting state, never the command,
//! and a denial or an inspection adds nothing to it.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{
    assert_take_continues, check_in_memory_round_trips, check_rdb_restart, digest, info,
    info_field, make_buckets, per_server, query, restart_keeps_buckets, take, wait_until, Bucket,
    Connection, Flavor, Server, Stop,
};

fn in_memory_round_trips(flavor: Flavor) {
    let server = Server::start(flavor);
    check_in_memory_round_trips(&server);
}

fn rdb_save_and_restart(flavor: Flavor) {
    let mut server = Server::start(flavor);
    check_rdb_restart(&mut server);
}

fn aof_kill_rewrite_and_restart(flavor: Flavor) {
    let mut server = Server::builder(flavor)
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start();
    let mut con = server.conn();
    wait_no_rewrite(&mut con);
    let mut buckets = make_buckets(&mut con, "aof");
    let _: () = query(&mut con, redis::cmd("SET").arg("aof:plain").arg("x"));

    // The AOF holds SET ... PXAT, never THROTTLE.TAKE.
    let text = aof_text(server.dir());
    assert!(
        !text.contains("throttle"),
        "the AOF holds the command:\n{}",
        shown(&text)
    );
    assert!(
        text.contains("pxat"),
        "the AOF holds no SET ... PXAT:\n{}",
        shown(&text)
    );

    // A denial and TOKENS 0 write nothing to it (appendfsync always: a write is in the file
    // before its reply is sent).
    let size = aof_size(server.dir());
    let debt = &buckets[1];
    assert_eq!(take(&mut con, debt.key.as_slice(), debt.quota)[0], 0);
    assert_eq!(
        take(
            &mut con,
            debt.key.as_slice(),
            &format!("{} MAXWAIT 1", debt.quota)
        )[0],
        0
    );
    assert_eq!(take(&mut con, "aof:missing", "5 1 TOKENS 0"), [1, 5, 0, 0]);
    let partial = &buckets[0];
    assert_eq!(
        take(
            &mut con,
            partial.key.as_slice(),
            &format!("{} TOKENS 0", partial.quota)
        )[0],
        1
    );
    assert_eq!(
        aof_size(server.dir()),
        size,
        "a denial or TOKENS 0 wrote to the AOF"
    );
    let _: () = query(&mut con, redis::cmd("SET").arg("aof:size-probe").arg("1"));
    assert!(
        aof_size(server.dir()) > size,
        "the AOF size does not show writes"
    );

    let before = digest(&mut con);
    drop(con);
    let mut con = restart_keeps_buckets(
        &mut server,
        &before,
        &buckets,
        Stop::Kill,
        "kill -9 and AOF replay",
    );

    // BGREWRITEAOF (default: an RDB preamble), then a take that lands in the new
    // incremental file, then a restart.
    rewrite(&mut con);
    take_one_more(&mut con, &mut buckets[0], "after BGREWRITEAOF");
    let before = digest(&mut con);
    drop(con);
    let mut con = restart_keeps_buckets(
        &mut server,
        &before,
        &buckets,
        Stop::Clean,
        "BGREWRITEAOF and restart",
    );

    // A rewrite without the preamble writes commands: SET and PEXPIREAT, still no command.
    let _: () = query(
        &mut con,
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("aof-use-rdb-preamble")
            .arg("no"),
    );
    rewrite(&mut con);
    let text = aof_text(server.dir());
    assert!(
        !text.contains("throttle"),
        "the rewritten AOF holds the command:\n{}",
        shown(&text)
    );
    assert!(
        text.contains("pexpireat"),
        "the rewritten AOF holds no PEXPIREAT:\n{}",
        shown(&text)
    );
    take_one_more(
        &mut con,
        &mut buckets[2],
        "after a rewrite without preamble",
    );
    let before = digest(&mut con);
    drop(con);
    let mut con = restart_keeps_buckets(
        &mut server,
        &before,
        &buckets,
        Stop::Kill,
        "a plain rewrite and kill -9",
    );
    for bucket in &buckets {
        assert_take_continues(
            &mut con,
            &bucket.key,
            bucket,
            "after a plain rewrite and kill -9",
        );
    }
}

/// Takes one more token from `bucket` and records its new state.
fn take_one_more(con: &mut Connection, bucket: &mut Bucket, when: &str) {
    assert_take_continues(con, &bucket.key, bucket, when);
    bucket.state += bucket.interval_ns;
    bucket.expiry = common::ceil_ms(bucket.state);
    bucket.remaining = (bucket.remaining - 1).max(0);
}

/// Starts BGREWRITEAOF and waits until it has finished, successfully.
fn rewrite(con: &mut Connection) {
    wait_no_rewrite(con);
    let started = Instant::now();
    let _: String = query(con, &redis::cmd("BGREWRITEAOF"));
    wait_no_rewrite(con);
    let persistence = info(con, "persistence");
    assert_eq!(
        info_field(&persistence, "aof_last_bgrewrite_status"),
        Some("ok"),
        "{persistence}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

fn wait_no_rewrite(con: &mut Connection) {
    wait_until(
        "no AOF rewrite in progress or scheduled",
        Duration::from_secs(10),
        || {
            let persistence = info(con, "persistence");
            info_field(&persistence, "aof_rewrite_in_progress") == Some("0")
                && info_field(&persistence, "aof_rewrite_scheduled") == Some("0")
        },
    );
}

/// The AOF files: `appendonlydir/*` (Redis 7+, Valkey), else `appendonly.aof`.
fn aof_files(dir: &Path) -> Vec<PathBuf> {
    let multi_part = dir.join("appendonlydir");
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&multi_part) {
        Ok(entries) => entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_none_or(|e| e != "manifest"))
            .collect(),
        Err(_) => vec![dir.join("appendonly.aof")],
    };
    files.sort();
    assert!(
        files.iter().any(|f| f.is_file()),
        "no AOF under {}",
        dir.display()
    );
    files
}

fn aof_size(dir: &Path) -> u64 {
    aof_files(dir)
        .iter()
        .map(|f| f.metadata().map_or(0, |m| m.len()))
        .sum()
}

/// Every AOF file, lowercased, with non-UTF-8 bytes replaced.
fn aof_text(dir: &Path) -> String {
    aof_files(dir)
        .iter()
        .map(|f| String::from_utf8_lossy(&std::fs::read(f).unwrap_or_default()).to_lowercase())
        .collect::<Vec<_>>()
        .join("\n")
}

/// AOF text for a failure message: printable, and not too long.
fn shown(text: &str) -> String {
    let printable: String = text.escape_debug().collect();
    match printable.char_indices().nth(4000) {
        Some((end, _)) => format!("{}...", &printable[..end]),
        None => printable,
    }
}

per_server!(
    in_memory_round_trips,
    rdb_save_and_restart,
    aof_kill_rewrite_and_restart
);

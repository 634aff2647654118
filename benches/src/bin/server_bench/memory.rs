//! Memory: used_memory per key for N buckets that are not full, against `SET key <int> PX`,
//! the Lua script's keys and the hand-written script's hashes, loaded through pipelines; with
//! `--redis-cell`, also redis-cell's; with `--baseline-module`, THROTTLE.TAKE's buckets also on
//! the baseline module's server (a bucket never paused or cut stores what it stored there).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redis::{Connection, Value};
use throttle_benches::{info, Scripts};
use throttle_testkit::{info_field, Server};

use crate::{words, Options, Target, STATE_LIKE_INT};

/// Commands per pipelined batch when loading keys.
const LOAD_BATCH: u64 = 10_000;

/// The commands that write one key.
type Commands = Box<dyn Fn(&str) -> Vec<redis::Cmd>>;

/// How the keys of one memory measurement are written.
struct Loader {
    label: &'static str,
    commands: Commands,
    /// The server whose memory it measures.
    target: Target,
}

/// The label of the paused buckets' row (the one with the pushback state).
const PAUSED: &str = "THROTTLE.TAKE, granted then paused (THROTTLE.PAUSE 600 s)";

fn loaders(scripts: &Scripts, cell: bool, baseline: bool) -> Vec<Loader> {
    // `<name> key args...`: a module command.
    let module_command = |name: &'static str| {
        move |key: &str, args: &str| {
            let mut cmd = redis::cmd(name);
            cmd.arg(key).arg(words(args));
            cmd
        }
    };
    let take = module_command("THROTTLE.TAKE");
    let twin = scripts.twin.clone();
    // EVALSHA <twin> 1 key <command> args...
    let script_command = move |key: &str, command: &str, args: &str| {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&twin).arg(1).arg(key).arg(command).arg(words(args));
        cmd
    };
    let script_pause = script_command.clone();
    let script = move |key: &str, args: &str| script_command(key, "take", args);
    let script2 = script.clone();
    let script3 = script.clone();
    let pause = module_command("THROTTLE.PAUSE");
    let hand = scripts.hand.clone();
    let loader = |label, commands: Commands| Loader {
        label,
        commands,
        target: Target::Main,
    };
    let mut loaders = vec![
        loader(
            "SET key <int> PX (baseline)",
            Box::new(|key| {
                let mut cmd = redis::cmd("SET");
                cmd.arg(key).arg(STATE_LIKE_INT).arg("PX").arg(3_600_000);
                vec![cmd]
            }),
        ),
        // Burst 10 at one token per 1000 s: 9 left, full again (and expiring) in 1000 s.
        loader(
            "THROTTLE.TAKE, granted",
            Box::new(move |key| vec![take(key, "10 0.001")]),
        ),
        loader(
            "EVALSHA script, granted",
            Box::new(move |key| vec![script(key, "10 0.001")]),
        ),
        // The same quota: a hash of tokens and ts, its TTL the 10,000 s until full.
        loader(
            "hand-written script, granted",
            Box::new(move |key| {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(&hand).arg(1).arg(key).arg(words("10 0.001 1"));
                vec![cmd]
            }),
        ),
        // Burst 1: the second take is denied (it only reads the bucket).
        loader(
            "THROTTLE.TAKE, granted then denied",
            Box::new(move |key| vec![take(key, "1 0.001"), take(key, "1 0.001")]),
        ),
        loader(
            "EVALSHA script, granted then denied",
            Box::new(move |key| vec![script2(key, "1 0.001"), script2(key, "1 0.001")]),
        ),
        // A take, then the supplier's pause of 600 s: while it lasts the state is the 32-byte
        // one (the pushback state), and the key expires when the pause and the refill are
        // over. The baseline module stores 8 bytes for it (it had no pushback state).
        loader(
            PAUSED,
            Box::new(move |key| vec![take(key, "10 0.001"), pause(key, "10 0.001 600000")]),
        ),
        loader(
            "EVALSHA script, granted then paused",
            Box::new(move |key| {
                vec![
                    script3(key, "10 0.001"),
                    script_pause(key, "pause", "10 0.001 600000"),
                ]
            }),
        ),
    ];
    if baseline {
        // THROTTLE.TAKE's plain buckets (never paused or cut) on the baseline module, each
        // right after the same row on this one.
        let rows = [
            (
                "THROTTLE.TAKE, granted",
                loader(
                    "THROTTLE.TAKE, granted (baseline module)",
                    Box::new(move |key| vec![take(key, "10 0.001")]),
                ),
            ),
            (
                "THROTTLE.TAKE, granted then denied",
                loader(
                    "THROTTLE.TAKE, granted then denied (baseline module)",
                    Box::new(move |key| vec![take(key, "1 0.001"), take(key, "1 0.001")]),
                ),
            ),
            // Not a plain bucket: the baseline has no pushback state (8 bytes while paused).
            (
                PAUSED,
                loader(
                    "THROTTLE.TAKE, granted then paused (THROTTLE.PAUSE 600 s) (baseline module)",
                    Box::new(move |key| vec![take(key, "10 0.001"), pause(key, "10 0.001 600000")]),
                ),
            ),
        ];
        for (after, mut row) in rows {
            row.target = Target::Baseline;
            let at = loaders
                .iter()
                .position(|l| l.label == after)
                .expect("a row");
            loaders.insert(at + 1, row);
        }
    }
    if cell {
        // The quotas of the THROTTLE.TAKE rows, as `capacity-1 1 1/rate`: burst 10, one per
        // 1000 s (9 left, its TTL the 1000 s until full); burst 1, the second call refused.
        // redis-cell writes nothing for a refused call, but reads through StringDMA, which
        // turns the embstr its write left into a raw copy.
        let cell_throttle = |key: &str, args: &str| {
            let mut cmd = redis::cmd("CL.THROTTLE");
            cmd.arg(key).arg(words(args));
            cmd
        };
        loaders.push(loader(
            "CL.THROTTLE (redis-cell), granted",
            Box::new(move |key| vec![cell_throttle(key, "9 1 1000")]),
        ));
        loaders.push(loader(
            "CL.THROTTLE (redis-cell), granted then denied",
            Box::new(move |key| {
                vec![
                    cell_throttle(key, "0 1 1000"),
                    cell_throttle(key, "0 1 1000"),
                ]
            }),
        ));
    }
    loaders
}

struct MemoryRow {
    label: &'static str,
    target: Target,
    /// STRLEN of one key (None for a hash).
    strlen: Option<i64>,
    bytes_per_key: f64,
    encoding: String,
    memory_usage: i64,
    seconds: f64,
}

pub fn memory(
    options: &Options,
    main: &Server,
    baseline: Option<&Server>,
    scripts: &Scripts,
    cell: bool,
) -> Result<String, String> {
    let keys = options.keys;
    let mut rows = Vec::new();
    for loader in loaders(scripts, cell, baseline.is_some()) {
        let server = match loader.target {
            Target::Main | Target::Paired => main,
            Target::Baseline => baseline.ok_or("no baseline server")?,
        };
        let started = Instant::now();
        flush_all(server)?;
        let before = used_memory(server)?;

        let mut con = server.conn();
        let mut next = 0;
        while next < keys {
            let end = (next + LOAD_BATCH).min(keys);
            let mut pipe = redis::pipe();
            for i in next..end {
                for cmd in (loader.commands)(&key_name(i)) {
                    pipe.add_command(cmd);
                }
            }
            pipe.query::<Vec<Value>>(&mut con)
                .map_err(|e| format!("{}: loading keys {next}..{end}: {e}", loader.label))?;
            next = end;
        }
        drop(con);
        let after = used_memory(server)?;

        let mut con = server.conn();
        let query = |con: &mut Connection, cmd: &mut redis::Cmd| -> Result<Value, String> {
            cmd.query(con).map_err(|e| format!("{}: {e}", loader.label))
        };
        let dbsize = query(&mut con, &mut redis::cmd("DBSIZE"))?;
        let keyspace = info(&mut con, "keyspace")?;
        let expected = format!("keys={keys},expires={keys},");
        if dbsize != Value::Int(keys as i64) || !keyspace.contains(&expected) {
            return Err(format!(
                "{}: expected {keys} keys, all with a TTL; DBSIZE {dbsize:?}, {keyspace}",
                loader.label
            ));
        }
        let sample = key_name(keys / 2);
        let encoding: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(&sample)
            .query(&mut con)
            .map_err(|e| e.to_string())?;
        let memory_usage: i64 = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&sample)
            .query(&mut con)
            .map_err(|e| e.to_string())?;
        let strlen: Option<i64> = redis::cmd("STRLEN").arg(&sample).query(&mut con).ok();
        let row = MemoryRow {
            label: loader.label,
            target: loader.target,
            strlen,
            bytes_per_key: (after as f64 - before as f64) / keys as f64,
            encoding,
            memory_usage,
            seconds: started.elapsed().as_secs_f64(),
        };
        eprintln!(
            "memory {:<52} {:>6.1} bytes/key ({} encoding, MEMORY USAGE {}) in {:.1} s",
            row.label, row.bytes_per_key, row.encoding, row.memory_usage, row.seconds
        );
        rows.push(row);
    }
    for server in std::iter::once(main).chain(baseline) {
        flush_all(server)?;
    }

    let set = rows[0].bytes_per_key;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## Memory: {keys} keys `bucket:NNNNNNN`, each with a TTL, used_memory per key\n"
    );
    let _ = writeln!(
        out,
        "| keys written by | bytes/key | x SET <int> PX | encoding | MEMORY USAGE (one key) \
         | value bytes (STRLEN) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---:|---:|");
    for row in &rows {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.2} | {} | {} | {} |",
            row.label,
            row.bytes_per_key,
            row.bytes_per_key / set,
            row.encoding,
            row.memory_usage,
            row.strlen.map_or("-".to_owned(), |n| n.to_string()),
        );
    }
    if baseline.is_some() {
        let _ = writeln!(
            out,
            "\nThis module against the baseline module (bytes/key; the plain buckets are never \
             paused or cut, and store 8 bytes in both; a paused bucket stores the 32-byte \
             pushback state in this module while the pause lasts, 8 bytes in the baseline):\n"
        );
        for (i, row) in rows.iter().enumerate().skip(1) {
            if row.target == Target::Baseline {
                let new = &rows[i - 1];
                let _ = writeln!(
                    out,
                    "- {}: {:.1} against {:.1} ({:+.1} bytes/key; STRLEN {} against {})",
                    new.label,
                    new.bytes_per_key,
                    row.bytes_per_key,
                    new.bytes_per_key - row.bytes_per_key,
                    new.strlen.unwrap_or(-1),
                    row.strlen.unwrap_or(-1),
                );
            }
        }
    }
    Ok(out)
}

/// `FLUSHALL SYNC` on a connection of its own, closed on return (`used_memory` waits for
/// it to go).
fn flush_all(server: &Server) -> Result<(), String> {
    redis::cmd("FLUSHALL")
        .arg("SYNC")
        .query::<()>(&mut server.conn())
        .map_err(|e| format!("FLUSHALL: {e}"))
}

fn key_name(i: u64) -> String {
    format!("bucket:{i:07}")
}

/// `used_memory` once only our probe connection is left (a closed client's buffers are freed
/// when the server notices the close).
fn used_memory(server: &Server) -> Result<u64, String> {
    let mut con = server.conn();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let info = info(&mut con, "clients")?;
        if info_field(&info, "connected_clients") == Some("1") || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Then once no key table is being rehashed: a table that grew while the keys were written
    // is rehashed incrementally, and until that is done the old table is counted too (65,536
    // buckets of 8 bytes: +5 bytes/key on 100,000 keys). The server's cron finishes it within
    // a few of its 100 ms ticks (1 ms of rehashing each); Redis 7.4+ and Valkey 8+ say when
    // (`mem_overhead_db_hashtable_rehashing`), Redis 7.0 does not, so that gets the time only.
    std::thread::sleep(Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = info(&mut con, "memory")?;
        let rehashing = info_field(&info, "mem_overhead_db_hashtable_rehashing");
        if rehashing.is_none_or(|bytes| bytes == "0") || Instant::now() > deadline {
            return info_field(&info, "used_memory")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("no used_memory in {info}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

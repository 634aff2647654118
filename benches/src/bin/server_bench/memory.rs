//! Memory: used_memory per key for N buckets that are not full, against `SET key <int> PX`
//! and the Lua script's keys, loaded through pipelines; with `--redis-cell`, also redis-cell's.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redis::{Connection, Value};
use throttle_testkit::{info_field, Server};

use crate::{words, Options, STATE_LIKE_INT};

/// Commands per pipelined batch when loading keys.
const LOAD_BATCH: u64 = 10_000;

/// The commands that write one key.
type Commands = Box<dyn Fn(&str) -> Vec<redis::Cmd>>;

/// How the keys of one memory measurement are written.
struct Loader {
    label: &'static str,
    commands: Commands,
}

fn loaders(sha: &str, cell: bool) -> Vec<Loader> {
    let take = |key: &str, args: &str| {
        let mut cmd = redis::cmd("THROTTLE.TAKE");
        cmd.arg(key).arg(words(args));
        cmd
    };
    let sha = sha.to_owned();
    let script = move |key: &str, args: &str| {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&sha).arg(1).arg(key).arg("take").arg(words(args));
        cmd
    };
    let script2 = script.clone();
    let mut loaders = vec![
        Loader {
            label: "SET key <int> PX (baseline)",
            commands: Box::new(|key| {
                let mut cmd = redis::cmd("SET");
                cmd.arg(key).arg(STATE_LIKE_INT).arg("PX").arg(3_600_000);
                vec![cmd]
            }),
        },
        // Burst 10 at one token per 1000 s: 9 left, full again (and expiring) in 1000 s.
        Loader {
            label: "THROTTLE.TAKE, granted",
            commands: Box::new(move |key| vec![take(key, "10 0.001")]),
        },
        Loader {
            label: "EVALSHA script, granted",
            commands: Box::new(move |key| vec![script(key, "10 0.001")]),
        },
        // Burst 1: the second take is denied (it only reads the bucket).
        Loader {
            label: "THROTTLE.TAKE, granted then denied",
            commands: Box::new(move |key| vec![take(key, "1 0.001"), take(key, "1 0.001")]),
        },
        Loader {
            label: "EVALSHA script, granted then denied",
            commands: Box::new(move |key| vec![script2(key, "1 0.001"), script2(key, "1 0.001")]),
        },
    ];
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
        loaders.push(Loader {
            label: "CL.THROTTLE (redis-cell), granted",
            commands: Box::new(move |key| vec![cell_throttle(key, "9 1 1000")]),
        });
        loaders.push(Loader {
            label: "CL.THROTTLE (redis-cell), granted then denied",
            commands: Box::new(move |key| {
                vec![
                    cell_throttle(key, "0 1 1000"),
                    cell_throttle(key, "0 1 1000"),
                ]
            }),
        });
    }
    loaders
}

struct MemoryRow {
    label: &'static str,
    bytes_per_key: f64,
    encoding: String,
    memory_usage: i64,
    seconds: f64,
}

pub fn memory(options: &Options, server: &Server, sha: &str, cell: bool) -> Result<String, String> {
    let keys = options.keys;
    let mut rows = Vec::new();
    for loader in loaders(sha, cell) {
        let started = Instant::now();
        let mut con = server.conn();
        redis::cmd("FLUSHALL")
            .arg("SYNC")
            .query::<()>(&mut con)
            .map_err(|e| format!("FLUSHALL: {e}"))?;
        drop(con);
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
        let keyspace: String = redis::cmd("INFO")
            .arg("keyspace")
            .query(&mut con)
            .map_err(|e| e.to_string())?;
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
        let row = MemoryRow {
            label: loader.label,
            bytes_per_key: (after as f64 - before as f64) / keys as f64,
            encoding,
            memory_usage,
            seconds: started.elapsed().as_secs_f64(),
        };
        eprintln!(
            "memory {:<36} {:>6.1} bytes/key ({} encoding, MEMORY USAGE {}) in {:.1} s",
            row.label, row.bytes_per_key, row.encoding, row.memory_usage, row.seconds
        );
        rows.push(row);
    }
    let mut con = server.conn();
    redis::cmd("FLUSHALL")
        .arg("SYNC")
        .query::<()>(&mut con)
        .map_err(|e| format!("FLUSHALL: {e}"))?;

    let baseline = rows[0].bytes_per_key;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## Memory: {keys} keys `bucket:NNNNNNN`, each with a TTL, used_memory per key\n"
    );
    let _ = writeln!(
        out,
        "| keys written by | bytes/key | x SET <int> PX | encoding | MEMORY USAGE (one key) |"
    );
    let _ = writeln!(out, "|---|---:|---:|---|---:|");
    for row in &rows {
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.2} | {} | {} |",
            row.label,
            row.bytes_per_key,
            row.bytes_per_key / baseline,
            row.encoding,
            row.memory_usage
        );
    }
    Ok(out)
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
        let info: String = redis::cmd("INFO")
            .arg("clients")
            .query(&mut con)
            .map_err(|e| format!("INFO clients: {e}"))?;
        if info_field(&info, "connected_clients") == Some("1") || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut con)
        .map_err(|e| format!("INFO memory: {e}"))?;
    info_field(&info, "used_memory")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("no used_memory in {info}"))
}

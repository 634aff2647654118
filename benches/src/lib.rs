//! Shared by the benchmark binaries and the criterion client bench: the binaries' `--server`
//! and its private server, the clients' runtime, `INFO` and `CONFIG RESETSTAT`, the bare
//! THROTTLE.TAKE of `acquire()`, the Lua script and the function library that do what
//! THROTTLE.TAKE does, the hand-written token bucket they are measured against, and parsers
//! for what `redis-benchmark` and `INFO commandstats` print (single `INFO` fields:
//! `throttle_testkit::info_field`).

use std::collections::BTreeMap;

use redis_throttle::DEFAULT_MAX_WAIT;
use throttle_bucket::{Command, Quota, TakeArgs, ThrottleCommand};
use throttle_testkit::{command_stat, command_stat_text, Flavor, Server};

/// A server's name on a benchmark's command line (`--server redis-8.2`), as the test kit
/// names its flavors.
pub fn flavor(name: &str) -> Result<Flavor, String> {
    Flavor::ALL
        .into_iter()
        .find(|f| f.name() == name)
        .ok_or_else(|| {
            let names: Vec<&str> = Flavor::ALL.iter().map(|f| f.name()).collect();
            format!("{name:?} is not a server: one of {}", names.join(", "))
        })
}

/// `--server`, the flavor a benchmark binary starts, as each one's command line has it
/// (`#[command(flatten)]`). The default is the binary's own, set on its command:
/// `#[command(mut_arg("flavor", |a| a.default_value("redis-8.2")))]` (hence not required
/// here).
#[derive(clap::Args)]
pub struct ServerOption {
    /// redis-7.0, redis-8.2, valkey-8.1 or valkey-9.1.
    #[arg(long = "server", required = false, value_parser = flavor)]
    pub flavor: Flavor,
}

impl ServerOption {
    /// A private server of the flavor with the module (the test kit's), its URL and a
    /// connection to it.
    pub fn start(&self) -> (Server, String, redis::Connection) {
        let server = Server::builder(self.flavor).start();
        let url = server.url();
        let con = server.conn();
        (server, url, con)
    }
}

/// The runtime the benchmarks' clients run on: two worker threads.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}

/// The THROTTLE.TAKE a limiter's `acquire()` sends for `key` (`Strategy::Reserve`, the
/// default deadline, one token): the bare command its overhead is measured against. Worded by
/// the command's own [`ThrottleCommand::words`], as the client words it, so that the two
/// cannot drift apart: `key capacity rate MAXWAIT 60000 TICKET`.
pub fn acquire_take(key: &str, capacity: u64, rate: u64) -> Result<redis::Cmd, String> {
    let quota = Quota::new(capacity, rate.to_string().as_bytes()).map_err(|e| e.to_string())?;
    let args = TakeArgs {
        quota,
        tokens: 1,
        max_wait_ms: u64::try_from(DEFAULT_MAX_WAIT.as_millis()).unwrap_or(u64::MAX),
        ticket: true,
        floor: None,
        inflight: None,
        line: None,
    };
    let mut cmd = redis::cmd(Command::Take.name());
    cmd.arg(key);
    for word in args.words() {
        cmd.arg(word.to_text());
    }
    Ok(cmd)
}

/// A count on a benchmark's command line: a whole number, at least 1.
pub fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{text:?} is not a whole number of at least 1")),
    }
}

/// Loads the client's Lua script (`redis_throttle::script::SOURCE`, every THROTTLE command)
/// into the server's script cache and returns its SHA1. THROTTLE.TAKE is
/// `EVALSHA <sha> 1 key take capacity rate [TOKENS n] [MAXWAIT ms]`.
pub fn load_lua_take(con: &mut redis::Connection) -> redis::RedisResult<String> {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(redis_throttle::script::SOURCE)
        .query(con)
}

/// Loads the client's function library (`redis_throttle::script::LIBRARY`) with
/// `FUNCTION LOAD REPLACE`; THROTTLE.TAKE is then
/// `FCALL throttle_take 1 key capacity rate [TOKENS n] [MAXWAIT ms] [TICKET] [FLOOR f]`.
/// Returns the library's name (`throttle`).
pub fn load_library(con: &mut redis::Connection) -> redis::RedisResult<String> {
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(redis_throttle::script::LIBRARY)
        .query(con)
}

/// The token bucket people write by hand today (`benches/lua/hand_written_bucket.lua`):
/// HMGET, HSET and PEXPIRE of a hash, floating point, no reservations. The baseline the
/// library and the script are measured against.
pub const HAND_WRITTEN_BUCKET: &str = include_str!("../lua/hand_written_bucket.lua");

/// Loads [`HAND_WRITTEN_BUCKET`] into the script cache and returns its SHA1; it is called as
/// `EVALSHA <sha> 1 key capacity rate [tokens]` and replies `{allowed, tokens left, ms to wait}`.
pub fn load_hand_written(con: &mut redis::Connection) -> redis::RedisResult<String> {
    redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(HAND_WRITTEN_BUCKET)
        .query(con)
}

/// What a workload's commands refer to: the scripts' SHA1s, loaded by [`load_scripts`] (the
/// library needs no name: its functions are called by theirs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scripts {
    /// The client's Lua script (`EVALSHA <twin> 1 key take ...`).
    pub twin: String,
    /// The hand-written bucket (`EVALSHA <hand> 1 key capacity rate [tokens]`).
    pub hand: String,
}

/// Loads the client's script, the hand-written bucket and the function library, as every
/// server of a benchmark run needs them.
pub fn load_scripts(con: &mut redis::Connection) -> Result<Scripts, String> {
    let twin = load_lua_take(con).map_err(|e| format!("SCRIPT LOAD (the client's script): {e}"))?;
    let hand = load_hand_written(con)
        .map_err(|e| format!("SCRIPT LOAD (the hand-written bucket): {e}"))?;
    load_library(con).map_err(|e| format!("FUNCTION LOAD REPLACE (the library): {e}"))?;
    Ok(Scripts { twin, hand })
}

/// One line of `INFO commandstats`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CommandStat {
    pub calls: u64,
    pub usec: u64,
    pub usec_per_call: f64,
    /// Calls that returned an error (Redis 7+).
    pub failed_calls: u64,
}

/// `INFO <section>` of the server behind `con` (an error names the section).
pub fn info(con: &mut redis::Connection, section: &str) -> Result<String, String> {
    redis::cmd("INFO")
        .arg(section)
        .query(con)
        .map_err(|e| format!("INFO {section}: {e}"))
}

/// `CONFIG RESETSTAT`: the server's command counts start again from 0.
pub fn reset_stats(con: &mut redis::Connection) -> Result<(), String> {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(con)
        .map_err(|e| format!("CONFIG RESETSTAT: {e}"))
}

/// The server's `INFO commandstats`, read by [`parse_commandstats`].
pub fn commandstats(con: &mut redis::Connection) -> Result<BTreeMap<String, CommandStat>, String> {
    info(con, "commandstats").map(|info| parse_commandstats(&info))
}

/// `INFO commandstats` by command name (`incr`, `throttle.take`, `evalsha`, ...), each line
/// read with the kit's [`command_stat`].
pub fn parse_commandstats(info: &str) -> BTreeMap<String, CommandStat> {
    info.lines()
        .filter_map(|line| {
            let name = line.trim().strip_prefix("cmdstat_")?.split_once(':')?.0;
            let count = |stat: &str| command_stat(info, name, stat).unwrap_or(0);
            let stat = CommandStat {
                calls: count("calls"),
                usec: count("usec"),
                usec_per_call: command_stat_text(info, name, "usec_per_call")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0),
                failed_calls: count("failed_calls"),
            };
            Some((name.to_ascii_lowercase(), stat))
        })
        .collect()
}

/// Requests per second and the median latency (ms) from `redis-benchmark --csv` output:
/// a header line, then `"<test>","<rps>","<avg>","<min>","<p50>",...`.
pub fn parse_benchmark_csv(output: &str) -> Option<(f64, f64)> {
    let line = output
        .lines()
        .map(str::trim)
        .rfind(|line| line.starts_with('"') && !line.starts_with("\"test\""))?;
    let fields: Vec<&str> = line.split("\",\"").map(|f| f.trim_matches('"')).collect();
    // The test name is the command line, which holds no `","`.
    let rps = fields.get(1)?.parse().ok()?;
    let p50 = fields
        .get(4)
        .and_then(|f| f.parse().ok())
        .unwrap_or(f64::NAN);
    Some((rps, p50))
}

/// The median of some numbers (the mean of the middle two for an even count); NaN if empty.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_commandstats() {
        let info = "# Commandstats\r\n\
            cmdstat_incr:calls=100,usec=11,usec_per_call=0.11,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_throttle.take:calls=7,usec=7,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_evalsha:calls=3,usec=15,usec_per_call=5.00\r\n";
        let stats = parse_commandstats(info);
        assert_eq!(stats.len(), 3);
        assert_eq!(
            stats["throttle.take"],
            CommandStat {
                calls: 7,
                usec: 7,
                usec_per_call: 1.0,
                failed_calls: 0,
            }
        );
        assert_eq!(stats["incr"].usec_per_call, 0.11);
        assert_eq!(stats["evalsha"].calls, 3);
    }

    #[test]
    fn reads_redis_benchmark_csv() {
        let out = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\
                   \"THROTTLE.TAKE bench:hot 1000000 1000000000\",\"631313.12\",\"1.210\",\"0.232\",\"1.175\",\"1.615\",\"1.999\",\"3.295\"\n";
        assert_eq!(parse_benchmark_csv(out), Some((631313.12, 1.175)));
        assert_eq!(parse_benchmark_csv("garbage"), None);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}

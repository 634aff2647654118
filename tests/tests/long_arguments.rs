//! Arguments of a megabyte in every numeric position of every command, through the module and
//! through the Lua twin: both give the same reply, and the twin's parse is linear in its input.
//!
//! The twin once parsed numbers with patterns that backtrack (`^0*(%d*)$`): a 32 KB capacity of
//! zeros and an `x` took seconds of server time inside one `string.match`, where Lua's time limit
//! is never checked, so no client got even BUSY. A parse of a megabyte that is quadratic takes
//! hours; one that is linear takes milliseconds. The bound below sits far between the two, so
//! it holds on a loaded machine and still catches anything worse than linear.

use std::time::Duration;

use redis_throttle::script::SOURCE;
use throttle_e2e::{command_stat, error_text, info, per_server, Connection, Flavor, Server, Value};

per_server!(megabyte_arguments_parse_in_linear_time);

/// The longest server time one call may take, in µs. The module parses a megabyte in about
/// 1 ms, the twin in tens of ms; a backtracking parse of the same takes hours.
const LIMIT_US: u64 = 1_000_000;

/// The argument's length.
const MEGABYTE: usize = 1 << 20;

/// Megabyte arguments: valid after long leading zeros, invalid after them, a long decimal
/// fraction, too many digits, and a long decimal with an `x` at the end.
fn shapes() -> Vec<(&'static str, Vec<u8>)> {
    let zeros = vec![b'0'; MEGABYTE];
    vec![
        ("zeros then 1", [zeros.as_slice(), b"1"].concat()),
        ("zeros then x", [zeros.as_slice(), b"x"].concat()),
        ("1. zeros 1", [b"1.".as_slice(), &zeros, b"1"].concat()),
        ("0. zeros x", [b"0.".as_slice(), &zeros, b"x"].concat()),
        ("nines", vec![b'9'; MEGABYTE]),
    ]
}

/// One call: the command (lower case, as the script names it), the key, and its words after
/// the key with a `#` where the long argument goes.
const CALLS: &[(&str, &[&str])] = &[
    ("take", &["#", "9"]),
    ("take", &["8", "#"]),
    ("take", &["8", "9", "TOKENS", "#"]),
    ("take", &["8", "9", "MAXWAIT", "#"]),
    ("take", &["8", "9", "#", "1"]),
    ("mtake", &["#", "9", "1"]),
    ("mtake", &["8", "#", "1"]),
    ("mtake", &["8", "9", "#"]),
    ("mtake", &["8", "9", "1", "MAXWAIT", "#"]),
    ("pause", &["#", "9", "1000"]),
    ("pause", &["8", "#", "1000"]),
    ("pause", &["8", "9", "#"]),
    ("give", &["#", "9", "1", "1"]),
    ("give", &["8", "#", "1", "1"]),
    ("give", &["8", "9", "#", "1"]),
    ("give", &["8", "9", "1", "#"]),
    ("peek", &["#", "9"]),
    ("peek", &["8", "#"]),
];

fn megabyte_arguments_parse_in_linear_time(flavor: Flavor) {
    let server = Server::start(flavor);
    let mut con = server.conn();
    // A parse that hangs fails the test instead of hanging it (the server is the test's own).
    con.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("read timeout");
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(SOURCE)
        .query(&mut con)
        .expect("SCRIPT LOAD");

    let mut slowest = [0u64; 2];
    for (shape, long) in shapes() {
        for (i, (command, words)) in CALLS.iter().enumerate() {
            let args: Vec<&[u8]> = words
                .iter()
                .map(|w| {
                    if *w == "#" {
                        long.as_slice()
                    } else {
                        w.as_bytes()
                    }
                })
                .collect();
            let key = format!("long:{i}:{shape}");
            let mut module = redis::cmd(&format!("throttle.{command}"));
            if *command == "mtake" {
                module.arg(1);
            }
            module.arg(format!("m:{key}")).arg(&args);
            let mut script = redis::cmd(if *command == "peek" {
                "EVALSHA_RO"
            } else {
                "EVALSHA"
            });
            script
                .arg(&sha)
                .arg(1)
                .arg(format!("s:{key}"))
                .arg(*command)
                .arg(&args);

            let (module_reply, module_us) =
                timed(&mut con, &module, &format!("throttle.{command}"));
            let stat = if *command == "peek" {
                "evalsha_ro"
            } else {
                "evalsha"
            };
            let (script_reply, script_us) = timed(&mut con, &script, stat);
            let what = format!(
                "{command} {words:?} with # = {shape} ({} bytes)",
                long.len()
            );
            assert_eq!(
                script_reply, module_reply,
                "{flavor}: the script and the module disagree on {what}"
            );
            for (slot, (backend, us)) in [("module", module_us), ("script", script_us)]
                .into_iter()
                .enumerate()
            {
                assert!(
                    us <= LIMIT_US,
                    "{flavor}: the {backend} took {us} µs of server time on {what}: a parse \
                     that is not linear in its input"
                );
                slowest[slot] = slowest[slot].max(us);
            }
        }
    }
    println!(
        "{flavor}: slowest call with a megabyte argument: module {} µs, script {} µs \
         (limit {LIMIT_US} µs)",
        slowest[0], slowest[1]
    );
}

/// Sends `cmd`: its reply (or error text) and the server time it took, from `INFO
/// commandstats` (`stat` is the command's name there).
fn timed(con: &mut Connection, cmd: &redis::Cmd, stat: &str) -> (Result<Value, String>, u64) {
    let usec = |con: &mut Connection| command_stat(&info(con, "commandstats"), stat, "usec");
    let before = usec(con).unwrap_or(0);
    let reply = cmd.query::<Value>(con).map_err(|e| error_text(&e));
    let after = usec(con).unwrap_or_else(|| panic!("no commandstats for {stat}"));
    (reply, after - before)
}

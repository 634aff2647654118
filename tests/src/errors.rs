//! The exact error texts of module/bucket/src/error.rs and module/src/bucket_key.rs, as the
//! server sends them.

pub const CAPACITY: &str =
    "ERR capacity must be a whole number of tokens from 1 to 1000000000000000";
pub const RATE: &str = "ERR rate must be a decimal number of tokens per second from \
                        0.000001 to 1000000000, like 10 or 0.5";
pub const FILL: &str = "ERR capacity / rate must be at most 315360000 seconds (10 years): \
                        raise the rate or lower the capacity";
pub const MAXWAIT: &str =
    "ERR MAXWAIT must be a whole number of milliseconds from 0 to 315360000000 (10 years)";
pub const PAUSE_MS: &str = "ERR ms must be a whole number of milliseconds from 1 to \
                            315360000000 (10 years): the supplier's Retry-After";
pub const TICKET: &str = "ERR ticket must be a ticket from a THROTTLE.TAKE or MTAKE ... \
                          TICKET reply for this key (a whole number of microseconds)";
pub const NUMKEYS: &str = "ERR numkeys must be a whole number from 1 to 16";
pub const DUPLICATE: &str =
    "ERR the keys of THROTTLE.MTAKE must be distinct: name each bucket once";
pub const TAKE_UNKNOWN: &str = "ERR unknown option for THROTTLE.TAKE: the options are TOKENS n, \
                                MAXWAIT ms, TICKET, FLOOR f, INFLIGHT n, LEASE ms, LINE \
                                place_ms and WAITER id";
pub const FACTOR: &str =
    "ERR factor must be a decimal from 0.01 to 1, like 0.7: the rate is multiplied by it";
pub const RECOVERY: &str = "ERR recovery_ms must be a whole number of milliseconds from 1 to \
                            315360000000 (10 years): how long the rate takes to climb back";
pub const REMAINING: &str = "ERR remaining must be a whole number of tokens from 0 to \
                             1000000000000000: what the supplier says is left";
pub const RESET_MS: &str = "ERR reset_ms must be a whole number of milliseconds from 0 to \
                            315360000000 (10 years): when the supplier's quota resets";
pub const DEBIT_TOKENS: &str = "ERR n must be a whole number of tokens from 0 to \
                                1000000000000000";
pub const TOO_DEEP: &str = "ERR THROTTLE.DEBIT would put the bucket more than 20 years in \
                            debt: debit fewer tokens, or DEL the key to start a full bucket";
pub const MTAKE_UNKNOWN: &str = "ERR unknown option for THROTTLE.MTAKE: the options are MAXWAIT \
                                 ms, FLOOR f [f ...] (one floor per key), TICKET, INFLIGHT n, \
                                 LEASE ms, LINE place_ms and WAITER id";
pub const WRONGTYPE: &str = "WRONGTYPE the key holds a value that is not a string, so not \
                             a THROTTLE bucket: use another key";
pub const NOT_BUCKET: &str = "ERR the key holds a string that is not a THROTTLE bucket \
                              (expected the 8- or 32-byte state THROTTLE.TAKE writes, or one \
                              with calls in flight); use another key, or DEL this one to start a full bucket";

/// The server's (and the module's) arity error; `command` in lower case.
pub fn arity(command: &str) -> String {
    format!("ERR wrong number of arguments for '{command}' command")
}

pub fn tokens(capacity: u64) -> String {
    format!("ERR TOKENS must be a whole number from 0 to the capacity ({capacity})")
}

pub fn give_tokens(capacity: u64) -> String {
    format!("ERR n must be a whole number of tokens from 0 to the capacity ({capacity})")
}

pub fn triples(keys: usize) -> String {
    format!(
        "ERR THROTTLE.MTAKE needs capacity, rate and tokens for each of its {keys} keys, \
         in key order, then the options (MAXWAIT ms, FLOOR f [f ...], TICKET, INFLIGHT n, \
         LEASE ms, LINE place_ms, WAITER id)"
    )
}

pub fn missing(option: &str) -> String {
    format!("ERR {option} needs a value: {option} n")
}

pub fn repeated(option: &str) -> String {
    format!("ERR {option} is given more than once")
}

pub fn floors(keys: usize) -> String {
    format!("ERR FLOOR needs one floor per key, in key order: {keys} values")
}

pub fn floor(capacity: u64) -> String {
    format!(
        "ERR FLOOR must be a whole number of tokens below the capacity ({capacity}) that \
         leaves room for the call's TOKENS"
    )
}

//! What a test reads from its environment: the long mode, and the variables a parent test
//! sets for the worker processes it spawns.

/// `THROTTLE_LONG` set (and not `0`): the soaks and restarts run their long versions.
pub fn long_mode() -> bool {
    std::env::var_os("THROTTLE_LONG").is_some_and(|v| !v.is_empty() && v != "0")
}

/// An environment variable a worker process needs; panics if the parent did not set it.
#[track_caller]
pub fn worker_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"))
}

/// A number a worker process needs from its environment (an instant, a count).
#[track_caller]
pub fn worker_number<T: std::str::FromStr>(name: &str) -> T {
    let text = worker_env(name);
    text.parse()
        .unwrap_or_else(|_| panic!("{name}={text} is not a number"))
}

//! Running async client code from a synchronous test on a shared machine.

/// A multi-threaded tokio runtime for a synchronous `#[test]` (as `per_server!` makes them,
/// and as a worker process runs).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Timing tests in one binary take this lock, so they do not run at once on a shared machine.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

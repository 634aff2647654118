//! A demo's scenario, run to its end or until Ctrl-C, SIGTERM or SIGHUP stops it. Either way
//! everything the scenario started in the runtime (the mocks, the child processes) is gone
//! when this returns; the caller then drops the private Redis.

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

/// How long a failed scenario waits for a signal before it calls itself failed.
const SIGNAL_GRACE: Duration = Duration::from_millis(500);
/// How long the runtime's tasks get to finish once the scenario is over.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs `scenario` on a runtime of two threads. Its result; or, when it failed, a runtime
/// could not be built or a signal stopped it, the exit code, with why already said on stderr
/// after `program` ("pix-demo").
pub fn run_until_stopped<T>(
    program: &str,
    scenario: impl Future<Output = Result<T, String>>,
) -> Result<T, ExitCode> {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("{program}: no tokio runtime: {err}");
            return Err(ExitCode::FAILURE);
        }
    };
    let result = runtime.block_on(async {
        let signal = stop_signal(program);
        tokio::pin!(signal);
        tokio::select! {
            biased;
            signal = &mut signal => Err(signal),
            outcome = scenario => match outcome {
                Ok(outcome) => Ok(Ok(outcome)),
                // Ctrl-C in a terminal reaches the children too, and their end can be seen
                // before our own signal: look for it briefly before calling it a failure.
                Err(err) => match tokio::time::timeout(SIGNAL_GRACE, &mut signal).await {
                    Ok(signal) => Err(signal),
                    Err(_) => Ok(Err(err)),
                },
            },
        }
    });
    // Dropping the scenario's future killed the children; now the runtime's other tasks.
    runtime.shutdown_timeout(SHUTDOWN_TIMEOUT);
    match result {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(err)) => {
            eprintln!("{program}: {err}");
            Err(ExitCode::FAILURE)
        }
        Err((name, code)) => {
            eprintln!("{program}: {name}: stopped, and stopped everything it had started");
            Err(ExitCode::from(code))
        }
    }
}

/// Waits for Ctrl-C, SIGTERM or SIGHUP; gives the signal's name and the exit code a shell
/// would report for it.
async fn stop_signal(program: &str) -> (&'static str, u8) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut interrupt), Ok(mut terminate), Ok(mut hangup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        eprintln!("{program}: cannot watch for signals; Ctrl-C may leave the Redis server running");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => ("interrupted", 130),
        _ = terminate.recv() => ("terminated", 143),
        _ = hangup.recv() => ("hung up", 129),
    }
}

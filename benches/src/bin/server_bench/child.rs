//! Child processes with a deadline: every redis-benchmark, valgrind and callgrind_control run
//! is killed if it does not finish in time.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Runs a child to completion within `timeout` (killed after it), returns its stdout; a
/// non-zero exit is an error that shows stderr.
pub fn run_bounded(mut command: Command, timeout: Duration) -> Result<String, String> {
    let shown = format!("{command:?}");
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn {shown}: {e}"))?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = wait_bounded(&mut child, timeout);
    let (stdout, stderr) = (join(stdout), join(stderr));
    match status {
        Some(status) if status.success() => Ok(stdout),
        Some(status) => Err(format!("{shown} failed ({status}):\n{stderr}{stdout}")),
        None => Err(format!("{shown} did not finish within {timeout:?}; killed")),
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}

fn join(handle: JoinHandle<String>) -> String {
    handle.join().unwrap_or_default()
}

/// Waits for the child up to `timeout`; kills it (and reaps it) after that.
fn wait_bounded(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_children() {
        let mut sleeper = Command::new("sleep");
        sleeper.arg("5");
        let started = Instant::now();
        assert!(run_bounded(sleeper, Duration::from_millis(100)).is_err());
        assert!(started.elapsed() < Duration::from_secs(3));
        let mut echo = Command::new("echo");
        echo.arg("hi");
        assert_eq!(
            run_bounded(echo, Duration::from_secs(5)).unwrap().trim(),
            "hi"
        );
    }
}

//! A test binary run again as a worker process that the test can freeze (SIGSTOP), thaw
//! (SIGCONT) and kill (SIGKILL): the partitioned-quota fleet's workers.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::ChildOutput;

/// This test binary run again as `--exact <test> --nocapture`, with `env` telling that test
/// to do a worker's job. Both pipes are drained while it runs, so what it printed before a
/// SIGKILL is kept. Dropping it kills and reaps it (thawing it first).
pub struct SignalledChild {
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
}

impl SignalledChild {
    pub fn spawn(test: &str, env: &[(&str, String)]) -> SignalledChild {
        let exe = std::env::current_exe().expect("the test binary");
        let mut child = Command::new(exe)
            .args(["--exact", test, "--nocapture", "--test-threads=1"])
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn a worker process");
        let drain = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                let _ = pipe.read_to_end(&mut bytes);
                String::from_utf8_lossy(&bytes).into_owned()
            })
        };
        let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
        let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
        SignalledChild {
            child,
            stdout: Some(stdout),
            stderr: Some(stderr),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGSTOP: the process stops at once, wherever it is.
    pub fn freeze(&self) {
        self.signal(libc::SIGSTOP);
    }

    /// SIGCONT.
    pub fn thaw(&self) {
        self.signal(libc::SIGCONT);
    }

    /// SIGKILL, and reaped.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) has no memory preconditions; the child is not reaped yet (we hold
        // it), so its pid is still ours.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, signal);
        }
    }

    /// Waits until the process exits (killing it at `deadline`), and what it printed.
    pub fn finish(&mut self, deadline: Instant) -> ChildOutput {
        let failure = loop {
            match self.child.try_wait().expect("wait for a worker") {
                Some(status) if status.success() => break None,
                Some(status) => break Some(format!("exited with {status}")),
                None if Instant::now() > deadline => {
                    self.thaw();
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    break Some("ran past its deadline and was killed".to_owned());
                }
                None => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let join = |handle: Option<JoinHandle<String>>| {
            handle
                .map(|h| h.join().unwrap_or_default())
                .unwrap_or_default()
        };
        ChildOutput {
            stdout: join(self.stdout.take()),
            stderr: join(self.stderr.take()),
            failure,
        }
    }
}

impl Drop for SignalledChild {
    fn drop(&mut self) {
        self.thaw();
        self.kill();
    }
}

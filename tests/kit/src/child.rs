//! A test binary run again as a child process: the way the fleet, soak, multi-limit and
//! partitioned-quota tests get workers that are real OS processes, which a test can also
//! freeze (SIGSTOP), thaw (SIGCONT) and kill (SIGKILL).

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// This test binary run again as `--exact <test> --nocapture`, with environment variables
/// that make that test do a worker's job. Both pipes are drained while it runs (thousands of
/// lines fill a pipe); dropping it kills and reaps it.
pub struct ChildTest {
    child: Child,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
}

/// What a [`ChildTest`] printed, and why it failed if it did.
#[derive(Debug)]
pub struct ChildOutput {
    pub stdout: String,
    pub stderr: String,
    /// `None`: it exited with success.
    pub failure: Option<String>,
}

impl ChildTest {
    /// Starts the test `test` of the current binary with `env` set.
    pub fn spawn(test: &str, env: &[(&str, String)]) -> ChildTest {
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
        ChildTest {
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

    /// SIGKILL (a frozen process too), and reaped.
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

    /// Waits until the child exits, killing it at `deadline`.
    pub fn finish(&mut self, deadline: Instant) -> ChildOutput {
        let failure = loop {
            match self.child.try_wait().expect("wait for a worker") {
                Some(status) if status.success() => break None,
                Some(status) => break Some(format!("exited with {status}")),
                None if Instant::now() > deadline => {
                    self.kill();
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

    /// [`ChildTest::finish`], and its stdout; panics with both outputs if it failed.
    #[track_caller]
    pub fn finish_ok(&mut self, deadline: Instant) -> String {
        let out = self.finish(deadline);
        if let Some(failure) = out.failure {
            panic!(
                "a worker {failure}\n--- stdout\n{}\n--- stderr\n{}",
                out.stdout, out.stderr
            );
        }
        out.stdout
    }
}

impl Drop for ChildTest {
    fn drop(&mut self) {
        self.kill();
    }
}

//! A server process, possibly under a wrapper, in a process group of its own.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

use crate::wait::poll;

/// How long to wait for a killed process to disappear.
const REAP_TIMEOUT: Duration = Duration::from_secs(10);

/// The spawned child (the wrapper, or the server itself) and every process it starts.
/// Dropping it kills them all with SIGKILL and waits until they are gone.
pub(crate) struct Process {
    child: Child,
    /// The server's own pid when it differs from the child's (under a wrapper), learned from
    /// `INFO server`: a wrapper may exit before its child, which we cannot wait(2) for.
    server_pid: Option<u32>,
    /// The child has been waited for: its pid, which is also the group id, may now belong to
    /// someone else, so the group must not be signalled any more.
    reaped: bool,
}

impl Process {
    pub(crate) fn spawn(mut command: Command) -> io::Result<Process> {
        // Its own process group, so one kill(-pgid) reaches the wrapper's child too.
        command.process_group(0);
        Ok(Process {
            child: command.spawn()?,
            server_pid: None,
            reaped: false,
        })
    }

    pub(crate) fn set_server_pid(&mut self, pid: u32) {
        if pid != self.child.id() {
            self.server_pid = Some(pid);
        }
    }

    /// The exit status, if the child has exited.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.child.try_wait().ok().flatten();
        self.reaped |= status.is_some();
        status
    }

    /// Sends `signal` to the whole process group, or, once the child is reaped, to the
    /// server alone if it outlived its wrapper.
    pub(crate) fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) has no memory preconditions. While the child is unreaped its pid, the
        // group id, cannot be reused, so the group signal reaches only our processes.
        unsafe {
            if !self.reaped {
                libc::kill(-(self.child.id() as libc::pid_t), signal);
            } else if let Some(pid) = self.server_pid.filter(|&pid| !pid_gone(pid)) {
                libc::kill(pid as libc::pid_t, signal);
            }
        }
    }

    /// Waits up to `timeout` for the child and the server to exit; true if they did.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> bool {
        let server = self.server_pid;
        poll(timeout, || {
            (self.exited().is_some() && server.is_none_or(pid_gone)).then_some(())
        })
        .is_some()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.child.wait();
        if let Some(pid) = self.server_pid {
            // Reparented to init once the wrapper died: we can only watch it go.
            poll(REAP_TIMEOUT, || pid_gone(pid).then_some(()));
        }
        for pid in [Some(self.child.id()), self.server_pid]
            .into_iter()
            .flatten()
        {
            remove_faketime_files(pid);
        }
    }
}

/// libfaketime, when preloaded, keeps a semaphore and a shared-memory file named after the
/// process's pid, and a killed process leaves them behind; a later process that gets the same
/// pid then fails to start ("sem_open: File exists"). The process is gone, so they are ours.
fn remove_faketime_files(pid: u32) {
    for name in [
        format!("sem.faketime_sem_{pid}"),
        format!("faketime_shm_{pid}"),
    ] {
        let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(name));
    }
}

/// True once `pid` has exited: no such process, or a zombie nobody has reaped yet
/// (a zombie holds no port, socket or file any more).
fn pid_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the command name, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|state| state == 'Z' || state == 'X'),
        Err(_) => true,
    }
}

//! A server on a fake clock: where libfaketime is, and a clock offset from the real one that
//! a test sets and steps.
//!
//! Preload the library (`LD_PRELOAD`) rather than run the `faketime` program: the program
//! keeps named semaphores in /dev/shm that leak when it is SIGKILLed, and a later wrapper whose
//! pid is reused then fails to start ("sem_open: File exists"). The program also sets
//! `FAKETIME`, which libfaketime prefers to the file a [`FakeClock`] rewrites.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::server::{Server, ServerBuilder};
use crate::Flavor;

/// A wall clock that reads the real one plus an offset, for the servers started from
/// [`FakeClock::server`]: the offset is in a file (`FAKETIME_TIMESTAMP_FILE`) that
/// libfaketime reads at every clock call (`FAKETIME_NO_CACHE=1`), so [`FakeClock::set`] steps
/// the servers' clock at once. The monotonic clock is left alone
/// (`FAKETIME_DONT_FAKE_MONOTONIC=1`): the server's timers run on it and would stall if it
/// were stepped back. Dropping the clock removes its directory.
pub struct FakeClock {
    dir: PathBuf,
    file: PathBuf,
}

impl FakeClock {
    /// A clock `offset_s` seconds from the real one, in a fresh directory of its own (named
    /// after `label`, this process and a counter).
    pub fn new(label: &str, offset_s: i64) -> FakeClock {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "throttle-faketime-{}-{label}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("create the fake clock's dir");
        let clock = FakeClock {
            file: dir.join("faketime"),
            dir,
        };
        clock.set(offset_s);
        clock
    }

    /// A server of `flavor` (module loaded) on this clock, for more settings before
    /// [`ServerBuilder::start`].
    pub fn server(&self, flavor: Flavor) -> ServerBuilder {
        Server::builder(flavor)
            .env("LD_PRELOAD", &libfaketime().display().to_string())
            .env("FAKETIME_TIMESTAMP_FILE", &self.file.display().to_string())
            .env("FAKETIME_NO_CACHE", "1")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
    }

    /// Sets the offset from the real clock. The file is replaced by a rename, so no clock
    /// read sees half a file.
    pub fn set(&self, offset_s: i64) {
        let tmp = self.dir.join("faketime.tmp");
        std::fs::write(&tmp, format!("{offset_s:+}s\n")).expect("write the faketime file");
        std::fs::rename(&tmp, &self.file).expect("replace the faketime file");
    }
}

impl Drop for FakeClock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// libfaketime's preload library: `$THROTTLE_LIBFAKETIME`, or where Debian's `libfaketime`
/// package puts it (the multi-threaded variant: the server has threads of its own).
pub fn libfaketime() -> PathBuf {
    if let Some(path) = std::env::var_os("THROTTLE_LIBFAKETIME").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    const NAME: &str = "faketime/libfaketimeMT.so.1";
    let mut candidates = vec![
        PathBuf::from("/usr/lib").join(NAME),
        PathBuf::from("/usr/local/lib").join(NAME),
    ];
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        // Multiarch dirs: /usr/lib/x86_64-linux-gnu/faketime/..., /usr/lib/aarch64-linux-gnu/...
        candidates.extend(entries.flatten().map(|e| e.path().join(NAME)));
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "libfaketime is missing: install Debian's faketime package \
                 (tests/install-servers.sh does), or set THROTTLE_LIBFAKETIME to libfaketimeMT.so.1"
            )
        })
}

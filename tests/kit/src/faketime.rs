//! Where libfaketime is, for tests that run a server on a fake clock.
//!
//! Preload the library (`LD_PRELOAD`) rather than run the `faketime` program: the program
//! keeps named semaphores in /dev/shm that leak when it is SIGKILLed, and a later wrapper whose
//! pid is reused then fails to start ("sem_open: File exists").

use std::path::PathBuf;

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

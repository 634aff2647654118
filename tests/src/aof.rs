//! The append-only file of a server's data dir, for the tests that check what a command
//! writes there (the resulting state, never the command).

use std::path::{Path, PathBuf};

use throttle_testkit::{Flavor, Server};

/// A server with the module that logs every write to its AOF before it replies
/// (`appendonly yes`, `appendfsync always`): what a call wrote is in the file once it answers.
pub fn aof_server(flavor: Flavor) -> Server {
    Server::builder(flavor)
        .arg("appendonly", "yes")
        .arg("appendfsync", "always")
        .start()
}

/// Checks that the AOF holds the module's effects and never its commands: no `throttle`
/// anywhere in it, and `effect` (`pxat` for `SET ... PXAT`, `pexpireat` after a rewrite
/// without the RDB preamble).
#[track_caller]
pub fn assert_aof_holds_effects(dir: &Path, effect: &str, what: &str) {
    let text = aof_text(dir);
    assert!(
        !text.contains("throttle"),
        "{what}: the AOF holds the command:\n{}",
        shown(&text)
    );
    assert!(
        text.contains(effect),
        "{what}: the AOF holds no {effect}:\n{}",
        shown(&text)
    );
}

/// The AOF files (`appendonlydir/*`, the manifest aside: every server here is Redis 7+ or
/// Valkey), sorted; panics if there is none.
#[track_caller]
pub fn aof_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("appendonlydir"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_none_or(|e| e != "manifest"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    assert!(
        files.iter().any(|f| f.is_file()),
        "no AOF under {}",
        dir.display()
    );
    files
}

/// The AOF's size in bytes: grows with every write the server logs.
#[track_caller]
pub fn aof_size(dir: &Path) -> u64 {
    aof_files(dir)
        .iter()
        .map(|f| f.metadata().map_or(0, |m| m.len()))
        .sum()
}

/// Every AOF file, lowercased, with non-UTF-8 bytes replaced.
#[track_caller]
pub fn aof_text(dir: &Path) -> String {
    aof_files(dir)
        .iter()
        .map(|f| String::from_utf8_lossy(&std::fs::read(f).unwrap_or_default()).to_lowercase())
        .collect::<Vec<_>>()
        .join("\n")
}

/// AOF text for a failure message: printable, and not too long.
fn shown(text: &str) -> String {
    let printable: String = text.escape_debug().collect();
    match printable.char_indices().nth(4000) {
        Some((end, _)) => format!("{}...", &printable[..end]),
        None => printable,
    }
}

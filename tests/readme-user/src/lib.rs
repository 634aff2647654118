//! The Rust snippets of the client guide and the workspace's README, compiled (and run, unless
//! `no_run`) as doc-tests of a crate whose only dependency on this project is `redis-throttle`,
//! as a user's is: no `redis` crate beside it (the client's own doc-tests have one, a
//! dev-dependency, so a snippet that names `redis::` there compiles whether or not a user's
//! project could build it). Only while rustdoc collects doc-tests:
//! `cargo test -p throttle-readme-user --doc` (tests/run.sh).

/// `client/README.md`: the client guide.
#[cfg(doctest)]
#[doc = include_str!("../../../client/README.md")]
pub struct ClientGuide;

/// `README.md`: the workspace's front page.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct WorkspaceReadme;

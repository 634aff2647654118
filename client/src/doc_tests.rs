//! The Rust snippets of the markdown files, compiled (and run, unless `no_run`) as doc-tests:
//! this crate's README (the crate docs, see `lib.rs`), the workspace's README, the docs folder
//! and the command reference. Only while rustdoc collects doc-tests (`cfg(doctest)`), and only
//! with every feature on, since the snippets use them all:
//! `cargo test -p redis-throttle --all-features --doc`.
//!
//! The files outside this package are not in its published tarball: nothing here is compiled
//! by a build, `cargo package`'s included.

#![cfg(all(
    feature = "connection-manager",
    feature = "cluster",
    feature = "metrics",
    feature = "tower",
    feature = "reqwest"
))]

/// `client/README.md`: the client guide.
#[doc = include_str!("../README.md")]
pub struct ClientGuide;

/// `README.md`: the workspace's front page.
#[doc = include_str!("../../README.md")]
pub struct WorkspaceReadme;

/// `module/README.md`: the command reference.
#[doc = include_str!("../../module/README.md")]
pub struct CommandReference;

/// `docs/operating.md`.
#[doc = include_str!("../../docs/operating.md")]
pub struct Operating;

/// `docs/trust-model.md`.
#[doc = include_str!("../../docs/trust-model.md")]
pub struct TrustModel;

/// `docs/benchmarks.md`.
#[doc = include_str!("../../docs/benchmarks.md")]
pub struct Benchmarks;

/// `docs/tests.md`.
#[doc = include_str!("../../docs/tests.md")]
pub struct Tests;

/// `docs/demos.md`.
#[doc = include_str!("../../docs/demos.md")]
pub struct Demos;

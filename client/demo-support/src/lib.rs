//! What the two demos (`pix-demo` in `client/demo/`, `ingest-demo` in `client/ingest-demo/`)
//! have in common, so that each keeps only its own scenario: the private Redis they run
//! against, the harness of their child processes (this same executable, a hidden subcommand),
//! the mocks' loopback HTTP server, the SVG primitives of their charts, the knobs and the
//! files of their output, their run until done or stopped, and the helpers of their scenario
//! tests (feature `scenario-tests`).

pub mod child;
pub mod fleet;
pub mod mock_server;
pub mod output;
pub mod redis_server;
#[cfg(feature = "scenario-tests")]
pub mod scenario_tests;
pub mod shared_start;
pub mod svg;
pub mod until_stopped;

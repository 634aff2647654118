//! What the two demos (`pix-demo` in `client/demo/`, `ingest-demo` in `client/ingest-demo/`)
//! have in common, so that each keeps only its own scenario: the private Redis they run
//! against, the harness of their child processes (this same executable, a hidden subcommand),
//! the mocks' loopback HTTP server and the children's client to it, the SVG primitives of
//! their charts, the knobs and the files of their output, and their run until done or
//! stopped. The helpers of their scenario tests are test code: `tests/scenario_tests`, which
//! each demo's tests include.

pub mod bucket;
pub mod child;
pub mod fleet;
pub mod http;
pub mod limiter;
pub mod mock_server;
pub mod output;
pub mod redis_server;
pub mod shared_start;
pub mod svg;
pub mod until_stopped;

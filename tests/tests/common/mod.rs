//! What every end-to-end test file reaches as `common`: the helpers of this crate's library
//! (`tests/src/`: `per_server!`, `take`, `state`, `slack_ms`, the seed scenario, ...), which
//! also re-exports the test kit's `Server`, `Flavor` and INFO readers.

pub use throttle_e2e::*;

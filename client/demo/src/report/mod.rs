//! The report a person reads: the numbers computed from a run (`summary`, also the `--json`
//! summary; the bucket phase's pushback in `pushback`, its seconds in `seconds`, the calls
//! open at the supplier in `open_calls`), and the whole as text (`text`).

pub mod open_calls;
pub mod pushback;
pub mod seconds;
pub mod summary;
pub mod text;

//! The report a person reads, by job: the numbers computed from a run (`summary`, also the
//! `--json` summary), the table of the phases
//! (`table`), the whole as text (`text`), the chart's data (`chart_series`), and the calls
//! open at once at the supplier (`open_calls`).

pub mod open_calls;
pub mod pushback;
pub mod seconds;
pub mod summary;
pub mod table;
pub mod text;

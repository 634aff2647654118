//! The report a person reads, by job: the numbers computed from a run (`summary`, also the
//! `--json` summary), the prose that says what they mean (`prose`), the table of the phases
//! (`table`), the whole as text (`text`), and the chart's data (`chart_series`).

pub mod chart_series;
pub mod prose;
pub mod pushback;
pub mod summary;
pub mod table;
pub mod text;

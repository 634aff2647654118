//! The gathered rows as the table `status` prints (pure: rows in, text out).

use redis_throttle::throttle_bucket::{PeekReply, SlotsReply};
use serde::Serialize;

use crate::args::seconds;
use crate::status::fleet::{last_wait_bound_ms, Fleet};
use crate::text::{cell, pad_left, pad_right, MAX_CELL, MAX_MESSAGE};

/// One quota as `status` shows it (and `--json` prints it).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Row {
    /// The bucket's key.
    pub(crate) key: String,
    /// How it was found: `report` (a process reports it) or `pattern` (SCAN, with --quota).
    pub(crate) found: &'static str,
    /// The node it was read from, `host:port`, on a cluster (absent on one server).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) node: Option<String>,
    pub(crate) capacity: u64,
    pub(crate) rate: String,
    /// Where `capacity` and `rate` come from: `server` (a quota kept at the server with
    /// THROTTLE.QUOTA, which every call on the key uses), `report` (the processes') or `given`
    /// (--quota).
    pub(crate) quota_from: &'static str,
    /// What the server says (THROTTLE.PEEK); none when it refused (then `problem` says why).
    pub(crate) state: Option<State>,
    /// The server's slot table (THROTTLE.SLOTS): the calls in flight it holds, whoever took
    /// them; none when it was not read (the server refused, or the bucket was not read).
    pub(crate) slots: Option<Slots>,
    /// The fleet's counters; none when no process reports the key.
    pub(crate) fleet: Option<Fleet>,
    /// What is wrong with this quota (the server refused PEEK).
    pub(crate) problem: Option<String>,
    /// What else to know (the processes disagree about the quota).
    pub(crate) note: Option<String>,
}

/// A bucket's slot table as it stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Slots {
    /// Slots held now (calls in flight, by every process and client on the key).
    pub(crate) held: u64,
    /// Until the first of their leases ends, ms (0: none held).
    pub(crate) first_lease_ms: u64,
}

impl From<SlotsReply> for Slots {
    fn from(table: SlotsReply) -> Slots {
        Slots {
            held: table.held,
            first_lease_ms: table.first_lease_ms,
        }
    }
}

/// A bucket as it stands, from THROTTLE.PEEK.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct State {
    /// Whole tokens now.
    pub(crate) tokens: u64,
    /// Until the bucket is full, ms (0: full).
    pub(crate) until_full_ms: u64,
    /// Until the pause ends, ms (0: not paused).
    pub(crate) paused_ms: u64,
    /// The rate's factor now, basis points (10 000: not cut).
    pub(crate) factor_bp: u64,
}

impl From<PeekReply> for State {
    fn from(peek: PeekReply) -> State {
        State {
            tokens: peek.remaining,
            until_full_ms: peek.reset_ms,
            paused_ms: peek.paused_ms,
            factor_bp: u64::from(peek.factor_bp),
        }
    }
}

const HEADER: [&str; 13] = [
    "KEY",
    "CAPACITY",
    "RATE/S",
    "TOKENS",
    "PAUSED",
    "CUT",
    "FULL IN",
    "PROCS",
    "GRANTS/S",
    "WAIT P50",
    "WAIT P99",
    "429s",
    "IN FLIGHT",
];

/// The table, one line per row, columns aligned, then the rows' problems and notes and the
/// `footer` lines. Text read from Redis (keys, rates, messages) is shown escaped
/// ([`crate::text::printable`]) and cut at [`MAX_CELL`] characters (messages at
/// [`MAX_MESSAGE`]), so that no report can forge a row, move the cursor or widen every row.
pub(crate) fn table(rows: &[Row], footer: &[String]) -> String {
    let mut lines: Vec<Vec<String>> = vec![HEADER.iter().map(|h| (*h).to_owned()).collect()];
    for row in rows {
        lines.push(cells(row));
    }
    let mut widths = [0usize; HEADER.len()];
    for line in &lines {
        for (width, shown) in widths.iter_mut().zip(line) {
            *width = (*width).max(shown.chars().count());
        }
    }
    let mut out = String::new();
    for line in &lines {
        let mut text = String::new();
        for (i, (shown, width)) in line.iter().zip(widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            // The key left-aligned, the numbers right-aligned.
            if i == 0 {
                text.push_str(&pad_right(shown, width));
            } else {
                text.push_str(&pad_left(shown, width));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    if rows.is_empty() {
        out.push_str("(no quotas)\n");
    }
    for row in rows {
        for text in row.problem.iter().chain(&row.note) {
            out.push_str(&format!(
                "{}: {}\n",
                cell(&row.key, MAX_CELL),
                cell(text, MAX_MESSAGE)
            ));
        }
    }
    for line in footer {
        out.push_str(&cell(line, MAX_MESSAGE));
        out.push('\n');
    }
    out
}

fn cells(row: &Row) -> Vec<String> {
    let dash = || "-".to_owned();
    let mut cells = vec![
        cell(&row.key, MAX_CELL),
        row.capacity.to_string(),
        cell(&row.rate, MAX_CELL),
    ];
    match &row.state {
        Some(state) => {
            cells.push(state.tokens.to_string());
            cells.push(if state.paused_ms == 0 {
                dash()
            } else {
                seconds(state.paused_ms)
            });
            cells.push(if state.factor_bp >= 10_000 {
                dash()
            } else {
                format!(
                    "x{}.{:02}",
                    state.factor_bp / 10_000,
                    state.factor_bp % 10_000 / 100
                )
            });
            cells.push(if state.until_full_ms == 0 {
                "full".to_owned()
            } else {
                seconds(state.until_full_ms)
            });
        }
        None => cells.extend(std::iter::repeat_n("?".to_owned(), 4)),
    }
    match &row.fleet {
        Some(fleet) => {
            cells.push(fleet.processes.to_string());
            cells.push(format!("{:.1}", fleet.grants_per_s));
            cells.push(wait(fleet, fleet.wait_p50_le_ms));
            cells.push(wait(fleet, fleet.wait_p99_le_ms));
            cells.push(fleet.responses_429.to_string());
        }
        None => cells.extend(std::iter::repeat_n(dash(), 5)),
    }
    cells.push(in_flight_cell(row));
    cells
}

/// A wait quantile: `-` with no waits, `<=5ms`, or `>100000ms` above the last bound.
fn wait(fleet: &Fleet, le_ms: Option<u64>) -> String {
    match (fleet.waits, le_ms) {
        (0, _) => "-".to_owned(),
        (_, Some(ms)) => format!("<={ms}ms"),
        (_, None) => format!(">{}ms", last_wait_bound_ms()),
    }
}

/// What IN FLIGHT shows and the dashboard charts: the server's count when its slot table was
/// read and some slot is held or a process reports a cap or a slot; the processes' sum when the
/// table was not read; none when nothing is in flight and no process counts calls in flight.
pub(crate) fn in_flight(row: &Row) -> Option<u64> {
    let reported = row.fleet.as_ref().and_then(|f| f.in_flight);
    match row.slots {
        Some(slots) if slots.held > 0 || reported.is_some() => Some(slots.held),
        Some(_) => None,
        None => reported,
    }
}

/// The IN FLIGHT cell: `held/cap` (the server's count, the cap the processes report), and
/// `(reported n)` when the processes' sum differs from the server's count; `-` when nothing is
/// in flight and no process counts calls in flight.
pub(crate) fn in_flight_cell(row: &Row) -> String {
    let reported = row.fleet.as_ref().and_then(|f| f.in_flight);
    let cap = row.fleet.as_ref().and_then(|f| f.max_in_flight);
    let Some(shown) = in_flight(row) else {
        return "-".to_owned();
    };
    let mut cell = match cap {
        Some(cap) => format!("{shown}/{cap}"),
        None => shown.to_string(),
    };
    if row.slots.is_some() {
        if let Some(reported) = reported.filter(|r| *r != shown) {
            cell.push_str(&format!(" (reported {reported})"));
        }
    }
    cell
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<Row> {
        vec![
            Row {
                key: "quota:pix".to_owned(),
                found: "report",
                node: None,
                capacity: 8,
                rate: "9".to_owned(),
                quota_from: "report",
                state: Some(State {
                    tokens: 0,
                    until_full_ms: 2273,
                    paused_ms: 1495,
                    factor_bp: 5000,
                }),
                slots: Some(Slots {
                    held: 5,
                    first_lease_ms: 900,
                }),
                fleet: Some(Fleet {
                    processes: 2,
                    grants_per_s: 8.5,
                    responses_429: 3,
                    held_by_pause: 0,
                    held_by_floor: 0,
                    in_flight: Some(5),
                    max_in_flight: Some(8),
                    slot_waits: 0,
                    leases_lost: 0,
                    waits: 40,
                    wait_p50_le_ms: Some(5),
                    wait_p99_le_ms: None,
                }),
                problem: None,
                note: None,
            },
            Row {
                key: "quota:other".to_owned(),
                found: "pattern",
                node: None,
                capacity: 100,
                rate: "0.5".to_owned(),
                quota_from: "report",
                state: Some(State {
                    tokens: 100,
                    until_full_ms: 0,
                    paused_ms: 0,
                    factor_bp: 10_000,
                }),
                slots: Some(Slots {
                    held: 2,
                    first_lease_ms: 30_000,
                }),
                fleet: None,
                problem: None,
                note: None,
            },
            Row {
                key: "quota:broken".to_owned(),
                found: "report",
                node: None,
                capacity: 1,
                rate: "1".to_owned(),
                quota_from: "report",
                state: None,
                slots: None,
                fleet: Some(Fleet {
                    processes: 1,
                    grants_per_s: 0.0,
                    responses_429: 0,
                    held_by_pause: 0,
                    held_by_floor: 0,
                    in_flight: None,
                    max_in_flight: None,
                    slot_waits: 0,
                    leases_lost: 0,
                    waits: 0,
                    wait_p50_le_ms: None,
                    wait_p99_le_ms: None,
                }),
                problem: Some("not a bucket".to_owned()),
                note: None,
            },
        ]
    }

    #[test]
    fn the_table_aligns_its_columns() {
        let text = table(&rows(), &["1 more".to_owned()]);
        let expected = "\
KEY           CAPACITY  RATE/S  TOKENS   PAUSED    CUT  FULL IN  PROCS  GRANTS/S  WAIT P50   WAIT P99  429s  IN FLIGHT
quota:pix            8       9       0  1.495 s  x0.50  2.273 s      2       8.5     <=5ms  >100000ms     3        5/8
quota:other        100     0.5     100        -      -     full      -         -         -          -     -          2
quota:broken         1       1       ?        ?      ?        ?      1       0.0         -          -     0          -
quota:broken: not a bucket
1 more
";
        assert_eq!(text, expected, "\n{text}");
    }

    #[test]
    fn in_flight_is_the_servers_count_beside_the_reported_sum() {
        let mut rows = rows();
        let pix = &mut rows[0];
        let cell = |row: &Row| cells(row).last().cloned().unwrap();
        assert_eq!(cell(pix), "5/8", "the server and the reports agree");
        pix.slots = Some(Slots {
            held: 8,
            first_lease_ms: 10,
        });
        assert_eq!(
            cell(pix),
            "8/8 (reported 5)",
            "a process that does not report"
        );
        pix.slots = Some(Slots {
            held: 0,
            first_lease_ms: 0,
        });
        assert_eq!(
            cell(pix),
            "0/8 (reported 5)",
            "leases ended, or a stale report"
        );
        pix.slots = None;
        assert_eq!(cell(pix), "5/8", "not read: the reported sum");
        // Nothing held, no process counting: nothing to show.
        rows[1].slots = Some(Slots {
            held: 0,
            first_lease_ms: 0,
        });
        assert_eq!(cell(&rows[1]), "-");
    }

    /// Every name in `value`'s objects, nested ones too.
    fn names(value: &serde_json::Value, out: &mut Vec<String>) {
        if let Some(object) = value.as_object() {
            for (name, inner) in object {
                out.push(name.clone());
                names(inner, out);
            }
        }
    }

    #[test]
    fn the_readme_lists_every_json_field() {
        let readme = include_str!("../../README.md");
        let mut all = Vec::new();
        for row in serde_json::to_value(rows()).unwrap().as_array().unwrap() {
            names(row, &mut all);
        }
        for name in all {
            assert!(
                readme.contains(&format!("`{name}`")),
                "client/cli/README.md does not list the --json field {name}"
            );
        }
    }

    #[test]
    fn no_rows_says_so() {
        assert_eq!(table(&[], &[]).lines().nth(1), Some("(no quotas)"));
    }

    #[test]
    fn json_has_the_servers_numbers() {
        let json = serde_json::to_value(rows()).unwrap();
        assert_eq!(json[0]["state"]["paused_ms"], 1495);
        assert_eq!(json[0]["fleet"]["wait_p99_le_ms"], serde_json::Value::Null);
        assert_eq!(json[1]["found"], "pattern");
        assert_eq!(json[1]["fleet"], serde_json::Value::Null);
        assert_eq!(json[0]["slots"]["held"], 5);
        assert_eq!(json[0]["slots"]["first_lease_ms"], 900);
        assert_eq!(json[0]["fleet"]["in_flight"], 5);
        assert_eq!(json[2]["slots"], serde_json::Value::Null);
    }
}

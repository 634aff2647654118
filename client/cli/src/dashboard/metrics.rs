//! `/metrics`: the last sample's rows in the Prometheus text exposition format, version 0.0.4
//! (pure: rows in, text out).
//!
//! Every metric is a gauge: the bucket's state is a level, and the fleet's numbers are what the
//! processes counted over their last reporting period (summed over the processes that report
//! now), not totals that only grow, so they are not Prometheus counters.
//!
//! A key is written by whoever writes a report: its label value is escaped as the format
//! requires (`\` as `\\`, `"` as `\"`, a newline as `\n`), so that no key can end a line,
//! close its label or forge a sample.

use std::fmt::Write as _;

use crate::status::Row;

/// The `Content-Type` of the text format.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One metric family: its name, its help, and its value for a row (none: no sample).
struct Family {
    name: &'static str,
    help: &'static str,
    /// The extra label (name, value) of its samples, beside `key` (and `node`).
    label: Option<(&'static str, &'static str)>,
    value: fn(&Row) -> Option<String>,
}

fn ms_as_seconds(ms: u64) -> String {
    number(ms as f64 / 1000.0)
}

/// A float as the format reads it (`+Inf`, `-Inf`, `NaN`, or a decimal).
fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_owned()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        value.to_string()
    }
}

/// A wait quantile's bound in seconds: `+Inf` when waits were counted above the last bound.
fn wait_bound(row: &Row, bound_ms: fn(&Row) -> Option<u64>) -> Option<String> {
    let fleet = row.fleet.as_ref()?;
    match bound_ms(row) {
        Some(ms) => Some(ms_as_seconds(ms)),
        None if fleet.waits > 0 => Some("+Inf".to_owned()),
        None => None,
    }
}

const FAMILIES: &[Family] = &[
    Family {
        name: "throttle_capacity",
        help: "The quota's capacity (tokens), as the newest report or --quota gives it.",
        label: None,
        value: |row| Some(row.capacity.to_string()),
    },
    Family {
        name: "throttle_tokens",
        help: "Whole tokens in the bucket (THROTTLE.PEEK).",
        label: None,
        value: |row| row.state.map(|s| s.tokens.to_string()),
    },
    Family {
        name: "throttle_paused_seconds",
        help: "Seconds left of the bucket's pause (0: not paused).",
        label: None,
        value: |row| row.state.map(|s| ms_as_seconds(s.paused_ms)),
    },
    Family {
        name: "throttle_rate_factor",
        help: "The factor the bucket's rate is cut to, 0 to 1 (1: not cut).",
        label: None,
        value: |row| {
            row.state
                .map(|s| number(s.factor_bp.min(10_000) as f64 / 10_000.0))
        },
    },
    Family {
        name: "throttle_slots_held",
        help: "Calls in flight the server holds for the quota (THROTTLE.SLOTS), every client's.",
        label: None,
        value: |row| row.slots.map(|s| s.held.to_string()),
    },
    Family {
        name: "throttle_fleet_max_in_flight",
        help: "The cap on calls in flight the processes report (the largest).",
        label: None,
        value: |row| {
            row.fleet
                .as_ref()
                .and_then(|f| f.max_in_flight)
                .map(|m| m.to_string())
        },
    },
    Family {
        name: "throttle_fleet_processes",
        help: "Processes with a live report of the quota.",
        label: None,
        value: |row| row.fleet.as_ref().map(|f| f.processes.to_string()),
    },
    Family {
        name: "throttle_fleet_grants_per_second",
        help: "Calls granted per second over the processes' last period, summed.",
        label: None,
        value: |row| row.fleet.as_ref().map(|f| number(f.grants_per_s)),
    },
    Family {
        name: "throttle_fleet_waits",
        help: "Granted calls' waits counted in the processes' last period, summed.",
        label: None,
        value: |row| row.fleet.as_ref().map(|f| f.waits.to_string()),
    },
    Family {
        name: "throttle_fleet_wait_seconds",
        help: "Upper bound of the fleet's wait quantile over the last period (its histogram \
               bucket's bound; +Inf: above the last bound).",
        label: Some(("quantile", "0.5")),
        value: |row| wait_bound(row, |r| r.fleet.as_ref().and_then(|f| f.wait_p50_le_ms)),
    },
    Family {
        name: "throttle_fleet_wait_seconds",
        help: "",
        label: Some(("quantile", "0.99")),
        value: |row| wait_bound(row, |r| r.fleet.as_ref().and_then(|f| f.wait_p99_le_ms)),
    },
    Family {
        name: "throttle_fleet_responses_429",
        help: "429 responses the processes' HTTP layers saw in their last period, summed.",
        label: None,
        value: |row| row.fleet.as_ref().map(|f| f.responses_429.to_string()),
    },
];

/// A label value as the format requires it: `\`, `"` and a newline escaped, the rest as is.
pub(crate) fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The exposition of `rows` sampled at `at_ms` (ms since the epoch); `failed`: the last
/// sampling failed (the rows are older). A family's samples follow its one `# HELP` and
/// `# TYPE`; a row without the value (a bucket not read, a key no process reports) has no
/// sample in that family.
pub(crate) fn render(rows: &[Row], at_ms: u64, failed: bool) -> String {
    let mut out = String::new();
    let head = |out: &mut String, name: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
    };
    head(
        &mut out,
        "throttle_sampled_at_seconds",
        "When the rows were last sampled, seconds since the epoch.",
    );
    let _ = writeln!(out, "throttle_sampled_at_seconds {}", ms_as_seconds(at_ms));
    head(
        &mut out,
        "throttle_sample_failed",
        "1 when the last sampling failed (the rows are as last seen), else 0.",
    );
    let _ = writeln!(out, "throttle_sample_failed {}", u8::from(failed));
    for family in FAMILIES {
        // The second quantile of a family shares its head.
        if !family.help.is_empty() {
            head(&mut out, family.name, family.help);
        }
        for row in rows {
            let Some(value) = (family.value)(row) else {
                continue;
            };
            let mut labels = format!("key=\"{}\"", escape_label(&row.key));
            if let Some(node) = &row.node {
                let _ = write!(labels, ",node=\"{}\"", escape_label(node));
            }
            if let Some((name, label)) = family.label {
                let _ = write!(labels, ",{name}=\"{label}\"");
            }
            let _ = writeln!(out, "{}{{{labels}}} {value}", family.name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dashboard::tests::row;
    use crate::status::State;

    #[test]
    fn escapes_exactly_backslash_quote_and_newline() {
        assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
        assert_eq!(escape_label("quota:é\t\r"), "quota:é\t\r");
    }

    #[test]
    fn renders_each_family_with_its_samples() {
        let hostile = row("q\"}\\x 1\n# TYPE evil counter");
        let mut pattern = row("quota:p");
        pattern.found = "pattern";
        pattern.fleet = None;
        pattern.slots = None;
        pattern.state = Some(State {
            tokens: 10,
            until_full_ms: 0,
            paused_ms: 0,
            factor_bp: 10_000,
        });
        let mut refused = row("quota:r");
        refused.state = None;
        refused.slots = None;
        refused.problem = Some("WRONGTYPE".to_owned());
        refused.node = Some("10.0.0.1:7000".to_owned());
        if let Some(fleet) = refused.fleet.as_mut() {
            fleet.waits = 0;
            fleet.wait_p50_le_ms = None;
            fleet.max_in_flight = None;
        }
        let text = render(&[hostile, pattern, refused], 1_700_000_000_250, false);
        let k = "key=\"q\\\"}\\\\x 1\\n# TYPE evil counter\"";
        let expected = format!(
            "\
# HELP throttle_sampled_at_seconds When the rows were last sampled, seconds since the epoch.
# TYPE throttle_sampled_at_seconds gauge
throttle_sampled_at_seconds 1700000000.25
# HELP throttle_sample_failed 1 when the last sampling failed (the rows are as last seen), else 0.
# TYPE throttle_sample_failed gauge
throttle_sample_failed 0
# HELP throttle_capacity The quota's capacity (tokens), as the newest report or --quota gives it.
# TYPE throttle_capacity gauge
throttle_capacity{{{k}}} 10
throttle_capacity{{key=\"quota:p\"}} 10
throttle_capacity{{key=\"quota:r\",node=\"10.0.0.1:7000\"}} 10
# HELP throttle_tokens Whole tokens in the bucket (THROTTLE.PEEK).
# TYPE throttle_tokens gauge
throttle_tokens{{{k}}} 4
throttle_tokens{{key=\"quota:p\"}} 10
# HELP throttle_paused_seconds Seconds left of the bucket's pause (0: not paused).
# TYPE throttle_paused_seconds gauge
throttle_paused_seconds{{{k}}} 1.5
throttle_paused_seconds{{key=\"quota:p\"}} 0
# HELP throttle_rate_factor The factor the bucket's rate is cut to, 0 to 1 (1: not cut).
# TYPE throttle_rate_factor gauge
throttle_rate_factor{{{k}}} 0.5
throttle_rate_factor{{key=\"quota:p\"}} 1
# HELP throttle_slots_held Calls in flight the server holds for the quota (THROTTLE.SLOTS), every client's.
# TYPE throttle_slots_held gauge
throttle_slots_held{{{k}}} 3
# HELP throttle_fleet_max_in_flight The cap on calls in flight the processes report (the largest).
# TYPE throttle_fleet_max_in_flight gauge
throttle_fleet_max_in_flight{{{k}}} 4
# HELP throttle_fleet_processes Processes with a live report of the quota.
# TYPE throttle_fleet_processes gauge
throttle_fleet_processes{{{k}}} 2
throttle_fleet_processes{{key=\"quota:r\",node=\"10.0.0.1:7000\"}} 2
# HELP throttle_fleet_grants_per_second Calls granted per second over the processes' last period, summed.
# TYPE throttle_fleet_grants_per_second gauge
throttle_fleet_grants_per_second{{{k}}} 2.5
throttle_fleet_grants_per_second{{key=\"quota:r\",node=\"10.0.0.1:7000\"}} 2.5
# HELP throttle_fleet_waits Granted calls' waits counted in the processes' last period, summed.
# TYPE throttle_fleet_waits gauge
throttle_fleet_waits{{{k}}} 7
throttle_fleet_waits{{key=\"quota:r\",node=\"10.0.0.1:7000\"}} 0
# HELP throttle_fleet_wait_seconds Upper bound of the fleet's wait quantile over the last period (its histogram bucket's bound; +Inf: above the last bound).
# TYPE throttle_fleet_wait_seconds gauge
throttle_fleet_wait_seconds{{{k},quantile=\"0.5\"}} 0.005
throttle_fleet_wait_seconds{{{k},quantile=\"0.99\"}} +Inf
# HELP throttle_fleet_responses_429 429 responses the processes' HTTP layers saw in their last period, summed.
# TYPE throttle_fleet_responses_429 gauge
throttle_fleet_responses_429{{{k}}} 3
throttle_fleet_responses_429{{key=\"quota:r\",node=\"10.0.0.1:7000\"}} 3
"
        );
        assert_eq!(text, expected);
        // No key breaks a line: every line is a comment or one sample.
        for line in text.lines() {
            assert!(
                line.starts_with("# HELP throttle_")
                    || line.starts_with("# TYPE throttle_")
                    || line.starts_with("throttle_"),
                "{line:?}"
            );
        }
        assert_eq!(text.lines().count(), 49);
    }

    #[test]
    fn no_rows_still_says_when_and_whether_it_failed() {
        let text = render(&[], 2000, true);
        assert!(text.contains("\nthrottle_sampled_at_seconds 2\n"), "{text}");
        assert!(text.contains("\nthrottle_sample_failed 1\n"), "{text}");
        assert!(!text.contains('{'), "{text}");
    }
}

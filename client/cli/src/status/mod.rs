//! `status`: find the quotas (the processes' reports, and a pattern), peek at each bucket in
//! pipelines, sum the reports per key, and print the table or JSON.

mod fleet;
mod table;

use std::collections::BTreeMap;

use redis::Value;
use redis_throttle::report::{report_key, Report, REPORT_PATTERN};

use crate::args::QuotaArg;
use crate::failure::Failure;
use crate::server::{not_a_bucket, Backend, Server};

use fleet::fleet_of;
#[cfg(test)]
pub(crate) use fleet::Fleet;
pub(crate) use fleet::{last_wait_bound_ms, quota_of};
pub(crate) use table::{table, Row, State};

/// Keys per SCAN step, MGET and pipeline.
const BATCH: usize = 1000;

/// What `status` prints.
pub(crate) async fn run(
    server: &mut Server,
    pattern: Option<&str>,
    quota: Option<&QuotaArg>,
    json: bool,
) -> Result<String, Failure> {
    let backend = server.backend().await?;
    let gathered = gather(server, backend, pattern, quota).await?;
    if json {
        to_json(&gathered.rows)
    } else {
        Ok(table(&gathered.rows, &gathered.footer))
    }
}

/// The rows as `status --json` prints them.
pub(crate) fn to_json(rows: &[Row]) -> Result<String, Failure> {
    serde_json::to_string_pretty(rows)
        .map(|text| text + "\n")
        .map_err(|err| Failure(format!("cannot write the JSON: {err}")))
}

/// What one `status` finds: its rows, sorted by key, and the lines below the table.
pub(crate) struct Gathered {
    pub(crate) rows: Vec<Row>,
    pub(crate) footer: Vec<String>,
}

/// The quotas `status` shows (`watch` and `dashboard` too): the reports' keys, and with
/// `pattern` the keys it matches, each peeked (in pipelines) on `backend`.
pub(crate) async fn gather(
    server: &mut Server,
    backend: Backend,
    pattern: Option<&str>,
    quota: Option<&QuotaArg>,
) -> Result<Gathered, Failure> {
    let reports = read_reports(server, REPORT_PATTERN).await?;
    let mut by_key: BTreeMap<String, Vec<Report>> = BTreeMap::new();
    for report in reports {
        by_key.entry(report.key.clone()).or_default().push(report);
    }
    let mut wanted: Vec<Row> = Vec::new();
    for (key, reports) in &by_key {
        let Some(((capacity, rate), note)) = quota_of(reports) else {
            continue;
        };
        wanted.push(Row {
            key: key.clone(),
            found: "report",
            capacity,
            rate,
            state: None,
            fleet: Some(fleet_of(reports)),
            problem: None,
            note,
        });
    }
    let mut footer = Vec::new();
    let mut from_pattern = Vec::new();
    if let Some(pattern) = pattern {
        let keys = scan(server, pattern, Some("string")).await?;
        let unreported: Vec<String> = keys
            .into_iter()
            .filter(|k| !k.starts_with("throttle:report:") && !by_key.contains_key(k))
            .collect();
        match quota {
            Some(_) => from_pattern = unreported,
            None if unreported.is_empty() => {}
            None => footer.push(format!(
                "{} key(s) match {pattern:?} that no process reports: pass --quota CAPACITY/RATE to show them",
                unreported.len()
            )),
        }
    }
    let reported = wanted.len();
    if let Some(quota) = quota {
        for key in from_pattern {
            wanted.push(Row {
                key,
                found: "pattern",
                capacity: quota.capacity,
                rate: quota.rate.clone(),
                state: None,
                fleet: None,
                problem: None,
                note: None,
            });
        }
    }
    let states = peek_all(server, backend, &wanted).await?;
    let mut rows = Vec::with_capacity(wanted.len());
    let mut skipped = 0;
    for (index, (mut row, state)) in wanted.into_iter().zip(states).enumerate() {
        match state {
            Ok(state) => row.state = Some(state),
            // A key found by its pattern alone that is not a bucket is not a quota.
            Err(message) if index >= reported && not_a_bucket(&message) => {
                skipped += 1;
                continue;
            }
            Err(message) => row.problem = Some(message),
        }
        rows.push(row);
    }
    if skipped > 0 {
        footer.push(format!(
            "{skipped} key(s) matching the pattern are not buckets: skipped"
        ));
    }
    rows.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(Gathered { rows, footer })
}

/// Every key matching `pattern` (of `kind`, if given), by SCAN.
async fn scan(
    server: &mut Server,
    pattern: &str,
    kind: Option<&str>,
) -> Result<Vec<String>, Failure> {
    let mut cursor: u64 = 0;
    let mut keys = Vec::new();
    loop {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(BATCH);
        if let Some(kind) = kind {
            cmd.arg("TYPE").arg(kind);
        }
        let (next, batch): (u64, Vec<Vec<u8>>) = server.query(&cmd, "SCAN").await?;
        // A key that is not UTF-8 cannot be a report's, nor printed: skipped.
        keys.extend(batch.into_iter().filter_map(|k| String::from_utf8(k).ok()));
        if next == 0 {
            return Ok(keys);
        }
        cursor = next;
    }
}

/// The reports stored under the keys matching `pattern`.
async fn read_reports(server: &mut Server, pattern: &str) -> Result<Vec<Report>, Failure> {
    let keys = scan(server, pattern, None).await?;
    let mut reports = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(BATCH) {
        let lines: Vec<Option<String>> = server
            .query(redis::cmd("MGET").arg(chunk), "MGET of the reports")
            .await?;
        reports.extend(lines.iter().flatten().filter_map(|l| Report::parse(l)));
    }
    Ok(reports)
}

/// The reports of `key` alone.
pub(crate) async fn reports_of(server: &mut Server, key: &str) -> Result<Vec<Report>, Failure> {
    let pattern = report_key(&escape_glob(key), "*");
    let reports = read_reports(server, &pattern).await?;
    Ok(reports.into_iter().filter(|r| r.key == key).collect())
}

/// `text` as a SCAN pattern that matches only itself.
fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// THROTTLE.PEEK of every row, pipelined: each state, or the server's error.
async fn peek_all(
    server: &mut Server,
    backend: Backend,
    rows: &[Row],
) -> Result<Vec<Result<State, String>>, Failure> {
    let mut states = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(BATCH) {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for row in chunk {
            pipe.add_command(backend.command("peek", &row.key, row.capacity, &row.rate));
        }
        let replies: Vec<Value> = pipe
            .query_async(&mut server.con)
            .await
            .map_err(|err| crate::failure::redis_failure(&server.url, "PEEK", &err))?;
        states.extend(replies.into_iter().map(state_of));
    }
    Ok(states)
}

/// A PEEK reply `[1, remaining, 0, reset_ms, paused_ms, factor_bp]` as a state.
pub(crate) fn state_of(reply: Value) -> Result<State, String> {
    let numbers: Vec<i64> = match reply {
        Value::ServerError(err) => return Err(err.to_string()),
        other => redis::from_redis_value(other).map_err(|err| err.to_string())?,
    };
    let number = |i: usize| {
        numbers
            .get(i)
            .and_then(|n| u64::try_from(*n).ok())
            .ok_or_else(|| format!("an unexpected PEEK reply: {numbers:?}"))
    };
    Ok(State {
        tokens: number(1)?,
        until_full_ms: number(3)?,
        paused_ms: number(4)?,
        factor_bp: number(5)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_escaped_for_scan() {
        assert_eq!(escape_glob("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
        assert_eq!(
            report_key(&escape_glob("quota:pix"), "*"),
            "throttle:report:{quota:pix}:*"
        );
    }

    #[test]
    fn a_peek_reply_is_read() {
        let reply = Value::Array([1, 7, 0, 112, 5, 10_000].map(Value::Int).to_vec());
        assert_eq!(
            state_of(reply),
            Ok(State {
                tokens: 7,
                until_full_ms: 112,
                paused_ms: 5,
                factor_bp: 10_000
            })
        );
        assert!(state_of(Value::Array(vec![Value::Int(1)])).is_err());
    }
}

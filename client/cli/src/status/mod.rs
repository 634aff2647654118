//! `status`: find the quotas (the processes' reports, and a pattern), peek at each bucket in
//! pipelines, sum the reports per key, and print the table or JSON.

mod fleet;
mod slots;
mod table;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{SystemTime, UNIX_EPOCH};

use redis::Value;
use redis_throttle::report::{report_key, Report, REPORT_PATTERN};
use redis_throttle::throttle_bucket::{parse_state, PeekArgs, Quota, ThrottleCommand};
use redis_throttle::Backend;

use crate::args::QuotaArg;
use crate::cluster::{connect_all, topology, Primary, Topology};
use crate::failure::Failure;
use crate::server::{not_a_bucket, refusal, Server};
use crate::text::{cell, json_for_terminal, MAX_MESSAGE};

use fleet::fleet_of;
#[cfg(test)]
pub(crate) use fleet::Fleet;
pub(crate) use fleet::{last_wait_bound_ms, quota_of};
#[cfg(test)]
pub(crate) use table::Slots;
pub(crate) use table::{in_flight, table, Row, State};

/// Keys per SCAN step, MGET and pipeline.
const BATCH: usize = 1000;

/// What `status` prints: the quotas of the server at `url` (`server`), or on a cluster of
/// each of its primaries.
pub(crate) async fn run(
    url: &str,
    server: &mut Server,
    pattern: Option<&str>,
    quota: Option<&QuotaArg>,
    json: bool,
) -> Result<String, Failure> {
    let gathered = gather_all(url, server, pattern, quota).await?;
    if json {
        // The lines below the table go to stderr: stdout stays the JSON alone.
        for line in &gathered.footer {
            eprintln!("throttle: {}", cell(line, MAX_MESSAGE));
        }
        to_json(&gathered.rows)
    } else {
        Ok(table(&gathered.rows, &gathered.footer))
    }
}

/// Now, ms since the Unix epoch.
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The quotas `status`, `watch` and the dashboard show: [`gather`] on the server at `url`
/// (`server`), or on a cluster on each of its primaries, as the given node lists them now (so
/// that a failover or a resharding shows at the next look).
pub(crate) async fn gather_all(
    url: &str,
    server: &mut Server,
    pattern: Option<&str>,
    quota: Option<&QuotaArg>,
) -> Result<Gathered, Failure> {
    Ok(match topology(server).await {
        Topology::Cluster { primaries, unread } => {
            gather_cluster(url, &primaries, unread, pattern, quota).await
        }
        Topology::One { why } => {
            let backend = server.backend().await?;
            let mut gathered = gather(server, backend, pattern, quota).await?;
            if let Some(why) = why {
                gathered.footer.push(format!(
                    "could not tell whether {} is a cluster node ({why}): only its buckets are shown",
                    server.url
                ));
            }
            gathered
        }
    })
}

/// [`gather`] on each primary of a cluster (SCAN sees one node's keys; a bucket and its
/// reports share a hash slot, so a node's reports name its own buckets), each row marked with
/// its node; a node that cannot be read is a line below the table, the others are shown.
async fn gather_cluster(
    url: &str,
    primaries: &[Primary],
    unread: usize,
    pattern: Option<&str>,
    quota: Option<&QuotaArg>,
) -> Gathered {
    let mut all = Gathered {
        rows: Vec::new(),
        footer: Vec::new(),
    };
    for (shown, connected) in connect_all(url, primaries).await {
        let gathered = match connected {
            Ok(mut node) => match node.backend().await {
                Ok(backend) => gather(&mut node, backend, pattern, quota).await,
                Err(failure) => Err(failure),
            },
            Err(failure) => Err(failure),
        };
        match gathered {
            Ok(gathered) => {
                all.rows.extend(gathered.rows.into_iter().map(|mut row| {
                    row.node = Some(shown.clone());
                    row
                }));
                all.footer
                    .extend(gathered.footer.into_iter().map(|l| format!("{shown}: {l}")));
            }
            Err(failure) => all.footer.push(format!(
                "{shown}: could not be read, its buckets are not shown: {failure}"
            )),
        }
    }
    if primaries.is_empty() {
        all.footer
            .push("the cluster lists no primary with an address: no bucket is shown".to_owned());
    }
    if unread > 0 {
        all.footer.push(format!(
            "{unread} line(s) of CLUSTER NODES could not be read: those nodes' buckets are not shown"
        ));
    }
    all.rows
        .sort_by(|a, b| a.key.cmp(&b.key).then_with(|| a.node.cmp(&b.node)));
    all
}

/// The rows as `status --json` prints them: every key whole, its control characters escaped
/// as JSON escapes them (and DEL, C1 and bidirectional controls too).
pub(crate) fn to_json(rows: &[Row]) -> Result<String, Failure> {
    serde_json::to_string_pretty(rows)
        .map(|text| json_for_terminal(&text) + "\n")
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
    let read = read_reports(server, REPORT_PATTERN).await?;
    let mut by_key: BTreeMap<String, Vec<Report>> = BTreeMap::new();
    for report in read.reports {
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
            node: None,
            capacity,
            rate,
            quota_from: "report",
            state: None,
            slots: None,
            fleet: Some(fleet_of(reports)),
            problem: None,
            note,
        });
    }
    let mut footer = read.problems;
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
                node: None,
                capacity: quota.capacity,
                rate: quota.rate.clone(),
                quota_from: "given",
                state: None,
                slots: None,
                fleet: None,
                problem: None,
                note: None,
            });
        }
    }
    // A quota kept at the server is the one every call uses: shown, and sent with PEEK (which
    // computes with it whatever it is sent).
    let kept = kept_all(server, &wanted).await?;
    for (row, kept) in wanted.iter_mut().zip(kept) {
        if let Some(kept) = kept {
            let (capacity, rate) = (kept.capacity, kept.rate().to_owned());
            if row.quota_from == "report" && (row.capacity, row.rate.as_str()) != (capacity, &rate)
            {
                let sent = format!("{}/{}", row.capacity, row.rate);
                row.note = Some(match row.note.take() {
                    Some(note) => format!("{note}; the processes send {sent}"),
                    None => format!("the processes send {sent}"),
                });
            }
            row.capacity = capacity;
            row.rate = rate;
            row.quota_from = "server";
        }
    }
    let states = peek_all(server, backend, &wanted).await?;
    let tables = slots::slots_all(server, backend, &wanted).await?;
    let mut rows = Vec::with_capacity(wanted.len());
    let mut skipped = 0;
    // Buckets read whose slot table was not, and the first reason.
    let mut no_slots: (usize, Option<String>) = (0, None);
    for (index, ((mut row, state), table)) in wanted.into_iter().zip(states).zip(tables).enumerate()
    {
        if index < reported && read.lossy_keys.contains(&row.key) {
            // The key shown is not the key written: its state would be another bucket's.
            row.problem = Some(
                "the reported key is not UTF-8 (shown with U+FFFD in place of its bad bytes): \
                 its bucket is not read"
                    .to_owned(),
            );
            rows.push(row);
            continue;
        }
        match state {
            Ok(state) => {
                row.state = Some(state);
                match table {
                    Ok(table) => row.slots = Some(table),
                    Err(message) => {
                        no_slots.0 += 1;
                        no_slots.1.get_or_insert(message);
                    }
                }
            }
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
    if let (count, Some(first)) = no_slots {
        footer.push(format!(
            "{count} quota(s) whose calls in flight the server did not tell (SLOTS: {first}): \
             IN FLIGHT shows what the processes report; load this client's library \
             (throttle load-library) or a module that has THROTTLE.SLOTS"
        ));
    }
    rows.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(Gathered { rows, footer })
}

/// The quota each row's key keeps at the server (THROTTLE.QUOTA), read with GET in pipelines
/// (its bytes are the bucket's state, which the bucket crate reads). A key the server will not
/// GET, or that holds no bucket, keeps none as far as the table goes: PEEK says the rest.
async fn kept_all(server: &Server, rows: &[Row]) -> Result<Vec<Option<Quota>>, Failure> {
    let now_ns = i64::try_from(unix_ms())
        .unwrap_or(i64::MAX / 1_000_000)
        .saturating_mul(1_000_000);
    let mut kept = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(BATCH) {
        let mut pipe = redis::pipe();
        for row in chunk {
            pipe.cmd("GET").arg(&row.key);
        }
        let mut con = server.con.clone();
        let values: Vec<Value> = match pipe.query_async(&mut con).await {
            Ok(values) => values,
            // NOPERM (an ACL without GET) or a key of another type: nothing kept is shown.
            Err(_) => vec![Value::Nil; chunk.len()],
        };
        kept.extend(values.into_iter().map(|value| {
            match value {
                Value::BulkString(bytes) => parse_state(&bytes, now_ns)
                    .ok()
                    .and_then(|s| s.kept)
                    .map(|quota| *quota),
                _ => None,
            }
        }));
    }
    kept.resize(rows.len(), None);
    Ok(kept)
}

/// Every key matching `pattern` (of `kind`, if given), by SCAN, as UTF-8 (a key that is not
/// cannot be a bucket's the tool could name: skipped).
async fn scan(
    server: &mut Server,
    pattern: &str,
    kind: Option<&str>,
) -> Result<Vec<String>, Failure> {
    let keys = scan_bytes(server, pattern, kind).await?;
    Ok(keys
        .into_iter()
        .filter_map(|k| String::from_utf8(k).ok())
        .collect())
}

/// Every key matching `pattern` (of `kind`, if given), by SCAN, as the server has it.
async fn scan_bytes(
    server: &mut Server,
    pattern: &str,
    kind: Option<&str>,
) -> Result<Vec<Vec<u8>>, Failure> {
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
        keys.extend(batch);
        if next == 0 {
            return Ok(keys);
        }
        cursor = next;
    }
}

/// The reports found, and what was wrong with the others.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Read {
    pub(crate) reports: Vec<Report>,
    /// The keys (as read, lossy) of reports whose key is not UTF-8.
    pub(crate) lossy_keys: BTreeSet<String>,
    /// One line per report that could not be read (at most [`MAX_PROBLEMS`], then a count).
    pub(crate) problems: Vec<String>,
}

/// Bad reports named one by one; the rest are counted.
const MAX_PROBLEMS: usize = 10;

impl Read {
    /// Reads the value of the report key `key` (`None`: gone since the SCAN).
    fn add(&mut self, key: &[u8], value: Value, bad: &mut usize) {
        let bytes = match value {
            Value::Nil => return,
            Value::BulkString(bytes) => bytes,
            Value::SimpleString(text) => text.into_bytes(),
            // MGET gives nil for a key of another type; anything else is not a report either.
            _ => Vec::new(),
        };
        let line = String::from_utf8_lossy(&bytes);
        match Report::parse(&line) {
            Some(report) => {
                if key_of_line(&bytes).is_some_and(|k| std::str::from_utf8(k).is_err()) {
                    self.lossy_keys.insert(report.key.clone());
                }
                self.reports.push(report);
            }
            None => {
                *bad = bad.saturating_add(1);
                if self.problems.len() < MAX_PROBLEMS {
                    self.problems.push(format!(
                        "{}: not a report line ({} bytes): skipped",
                        String::from_utf8_lossy(key),
                        bytes.len()
                    ));
                }
            }
        }
    }
}

/// The bytes after the first ` key=` of a report line: its key, as written.
fn key_of_line(line: &[u8]) -> Option<&[u8]> {
    const KEY: &[u8] = b" key=";
    let at = line.windows(KEY.len()).position(|w| w == KEY)?;
    line.get(at.saturating_add(KEY.len())..)
}

/// The reports stored under the keys matching `pattern`. A report that is not UTF-8 is read
/// lossy; one that is not a report is a problem line; neither stops the others.
async fn read_reports(server: &mut Server, pattern: &str) -> Result<Read, Failure> {
    let keys = scan_bytes(server, pattern, None).await?;
    let mut read = Read::default();
    let mut bad = 0usize;
    for chunk in keys.chunks(BATCH) {
        let values: Vec<Value> = server
            .query(redis::cmd("MGET").arg(chunk), "MGET of the reports")
            .await?;
        for (key, value) in chunk.iter().zip(values) {
            read.add(key, value, &mut bad);
        }
    }
    if bad > read.problems.len() {
        read.problems.push(format!(
            "{} more report key(s) hold no report line: skipped",
            bad.saturating_sub(read.problems.len())
        ));
    }
    Ok(read)
}

/// The reports of `key` alone.
pub(crate) async fn reports_of(server: &mut Server, key: &str) -> Result<Vec<Report>, Failure> {
    let pattern = report_key(&escape_glob(key), "*");
    let read = read_reports(server, &pattern).await?;
    Ok(read.reports.into_iter().filter(|r| r.key == key).collect())
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

/// THROTTLE.PEEK of every row, pipelined: each state, or why not (the server's refusal, a
/// reported quota the server could not be asked with).
async fn peek_all(
    server: &Server,
    backend: Backend,
    rows: &[Row],
) -> Result<Vec<Result<State, String>>, Failure> {
    each_row(server, backend, rows, "PEEK", |quota| PeekArgs { quota }).await
}

/// One command on every row's bucket with its quota (`args` of the quota), pipelined in
/// batches: each reply read back by the command, as the table has it (`T`), or why not. A row
/// whose reported quota is not one a server takes is not sent: its reason is the quota's.
pub(crate) async fn each_row<A: ThrottleCommand, T: From<A::Reply>>(
    server: &Server,
    backend: Backend,
    rows: &[Row],
    doing: &str,
    args: impl Fn(Quota) -> A,
) -> Result<Vec<Result<T, String>>, Failure> {
    let commands = server.commands(backend);
    let mut all = Vec::with_capacity(rows.len());
    for chunk in rows.chunks(BATCH) {
        let quotas: Vec<Result<Quota, String>> = chunk
            .iter()
            .map(|row| {
                Quota::parse(row.capacity.to_string().as_bytes(), row.rate.as_bytes())
                    .map_err(|err| err.to_string())
            })
            .collect();
        let calls: Vec<(&str, A)> = chunk
            .iter()
            .zip(&quotas)
            .filter_map(|(row, quota)| Some((row.key.as_str(), args(*quota.as_ref().ok()?))))
            .collect();
        let mut replies = commands
            .call_each(&calls)
            .await
            .map_err(|err| Failure(format!("{doing} on {} failed: {err}", server.url)))?
            .into_iter();
        for quota in quotas {
            all.push(match quota {
                Ok(_) => match replies.next() {
                    Some(reply) => reply.map(T::from).map_err(|err| refusal(&err)),
                    None => Err(format!("{doing}: no reply for this bucket")),
                },
                Err(why) => Err(why),
            });
        }
    }
    Ok(all)
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
}

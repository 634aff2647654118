//! `watch`: the `status` table, cleared and drawn again every period.

use std::io::Write as _;
use std::time::Duration;

use tokio::time::MissedTickBehavior;

use crate::args::{seconds, QuotaArg};
use crate::failure::{fail, Failure};
use crate::server::Server;
use crate::status::{gather_all, table, unix_ms};

/// The shortest period: each one is a SCAN of the reports and a pipeline of PEEKs.
pub(crate) const MIN_EVERY_MS: u64 = 100;
/// ANSI: cursor home, then clear the screen.
const CLEAR: &str = "\x1b[H\x1b[2J";

/// Draws the table every `every_ms` until stopped (Ctrl-C), or `count` times: the quotas of
/// the server at `url`, or of every primary of its cluster.
pub(crate) async fn run(
    url: &str,
    server: &mut Server,
    pattern: Option<&str>,
    quota: Option<&QuotaArg>,
    every_ms: u64,
    count: Option<u64>,
) -> Result<String, Failure> {
    if every_ms < MIN_EVERY_MS {
        return fail(format!(
            "--every {every_ms}ms is too short: at least {MIN_EVERY_MS}ms"
        ));
    }
    if count == Some(0) {
        return fail("--count 0 draws nothing: give at least 1".to_owned());
    }
    // A server without THROTTLE fails here, not in every frame.
    gather_all(url, server, pattern, quota).await?;
    let title = match pattern {
        Some(pattern) => format!("throttle status {pattern}"),
        None => "throttle status".to_owned(),
    };
    let mut ticker = tokio::time::interval(Duration::from_millis(every_ms));
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut drawn = 0u64;
    loop {
        ticker.tick().await;
        // A failure is shown in the frame, and the next period tries again.
        let body = match gather_all(url, server, pattern, quota).await {
            Ok(gathered) => table(&gathered.rows, &gathered.footer),
            Err(failure) => format!("throttle: {failure}\n"),
        };
        let text = frame(&title, &server.url, every_ms, unix_ms(), &body);
        let mut out = std::io::stdout().lock();
        if out
            .write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .is_err()
        {
            // A closed pipe (`| head`) ends the watch, not as a failure.
            return Ok(String::new());
        }
        drawn += 1;
        if count.is_some_and(|count| drawn >= count) {
            return Ok(String::new());
        }
    }
}

/// One screen: clear, a title line (what, where, how often, the time in UTC), a blank line,
/// then `body`.
pub(crate) fn frame(title: &str, url: &str, every_ms: u64, at_ms: u64, body: &str) -> String {
    format!(
        "{CLEAR}{title} on {url}, every {}: {} UTC\n\n{body}",
        seconds(every_ms),
        clock(at_ms)
    )
}

/// `HH:MM:SS` of a Unix time in ms, UTC.
pub(crate) fn clock(at_ms: u64) -> String {
    let s = at_ms / 1000 % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_clears_then_titles_the_table() {
        // 2026-12-05 07:41:42.5 UTC.
        let text = frame(
            "throttle status quota:*",
            "redis://h:1",
            1000,
            1_796_456_502_500,
            "KEY\n",
        );
        assert_eq!(
            text,
            "\x1b[H\x1b[2Jthrottle status quota:* on redis://h:1, every 1.000 s: 07:41:42 UTC\n\nKEY\n"
        );
    }

    #[test]
    fn the_clock_wraps_at_midnight() {
        assert_eq!(clock(0), "00:00:00");
        assert_eq!(clock(86_399_999), "23:59:59");
        assert_eq!(clock(86_400_000 + 61_000), "00:01:01");
    }
}

//! A partitioned-quota worker's lines read back (the format is in [`super`]'s header).

use redis_throttle::partitioned::LeaseEventKind;

/// How a worker stopped spending a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Given back: idle, yielded to another process, or at the end.
    Released,
    /// A renewal found the key gone or another owner's.
    Lost,
    /// No renewal confirmed before the lease's usable time ran out.
    Lapsed,
}

impl End {
    pub(super) fn of(kind: LeaseEventKind) -> End {
        match kind {
            LeaseEventKind::Lost => End::Lost,
            LeaseEventKind::Lapsed => End::Lapsed,
            _ => End::Released,
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            End::Released => "released",
            End::Lost => "lost",
            End::Lapsed => "lapsed",
        }
    }

    fn parse(word: &str) -> Option<End> {
        [End::Released, End::Lost, End::Lapsed]
            .into_iter()
            .find(|end| end.name() == word)
    }
}

/// One worker's lines.
#[derive(Debug, Default)]
pub struct Output {
    pub start: Option<i128>,
    /// `(at, done, partition)`.
    pub grants: Vec<(i128, i128, u32)>,
    /// `(partition, from, until)`.
    pub leases: Vec<(u32, i128, i128)>,
    /// `(partition, at, how)`: spending stopped.
    pub ends: Vec<(u32, i128, End)>,
    pub metrics: Option<String>,
}

impl Output {
    pub fn parse(stdout: &str) -> Output {
        let mut out = Output::default();
        for line in stdout.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let n = |i: usize| words.get(i).and_then(|w| w.parse::<i128>().ok());
            match words.first().copied() {
                Some("START") => out.start = n(1),
                // A SIGKILL may cut the last line short: only whole lines count.
                Some("GRANT") if words.len() == 4 => {
                    if let (Some(at), Some(done), Some(p)) = (n(1), n(2), n(3)) {
                        out.grants.push((at, done, p as u32));
                    }
                }
                Some("LEASE") if words.len() == 4 => {
                    if let (Some(p), Some(from), Some(until)) = (n(1), n(2), n(3)) {
                        out.leases.push((p as u32, from, until));
                    }
                }
                Some("LEASE_END") if words.len() == 4 => {
                    if let (Some(p), Some(at), Some(end)) = (n(1), n(2), End::parse(words[3])) {
                        out.ends.push((p as u32, at, end));
                    }
                }
                Some("METRICS") => out.metrics = Some(line.to_owned()),
                _ => {}
            }
        }
        out
    }
}

//! Bulk callers of one limiter take turns, each through its round trips and its sleep. A
//! floored reservation is granted only from tokens in the bucket now; several bulk callers
//! asking at once would each find the others' reservations and be refused (about 1.8 round
//! trips per bulk grant with six workers, when they could not reserve). One at a time, each
//! reserves tokens that are its own, and a limiter keeps at most one bulk reservation below
//! the floor.

use std::time::Duration;

use tokio::sync::{Mutex, MutexGuard};
use tokio::time::Instant;

use crate::Error;

/// The turn that the bulk callers of a limiter and its clones wait for, first come first
/// served. Interactive callers never wait for it.
#[derive(Debug, Default)]
pub(crate) struct BulkTurn(Mutex<()>);

/// A bulk caller's turn, and what is left of its deadline.
pub(crate) struct Turn<'a> {
    _guard: MutexGuard<'a, ()>,
    /// The deadline less the time spent waiting for the turn.
    pub deadline: Option<Duration>,
    /// The time spent waiting for the turn.
    pub waited: Duration,
}

impl BulkTurn {
    /// Waits for the turn, within `deadline`: past it, [`Error::DeadlineExceeded`], taking
    /// nothing.
    pub(crate) async fn take(&self, deadline: Option<Duration>) -> Result<Turn<'_>, Error> {
        let start = Instant::now();
        let guard = match deadline {
            None => self.0.lock().await,
            Some(limit) => tokio::time::timeout(limit, self.0.lock())
                .await
                .map_err(|_| Error::DeadlineExceeded {
                    needed: None,
                    deadline: limit,
                    paused: false,
                })?,
        };
        let waited = start.elapsed();
        Ok(Turn {
            _guard: guard,
            deadline: deadline.map(|d| d.saturating_sub(waited)),
            waited,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn callers_wait_their_turn_within_their_deadline() {
        let turn = BulkTurn::default();
        let first = turn.take(Some(Duration::from_secs(1))).await.unwrap();
        assert_eq!(first.deadline, Some(Duration::from_secs(1)));
        let late = turn.take(Some(Duration::from_millis(10))).await;
        assert!(matches!(
            late,
            Err(Error::DeadlineExceeded { needed: None, .. })
        ));
        let waiting = async {
            let second = turn.take(None).await.unwrap();
            second.waited
        };
        let release = async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(first);
        };
        let (waited, ()) = tokio::join!(waiting, release);
        assert_eq!(
            waited,
            Duration::from_millis(30),
            "in line until the first let go"
        );
    }
}

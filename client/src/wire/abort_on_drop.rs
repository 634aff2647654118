//! A background task that ends with what owns it.

use tokio::task::{AbortHandle, JoinHandle};

/// Aborts its task when dropped: the owner's `Drop` needs nothing more, and a task that only
/// holds a `Weak` to its owner never keeps it alive.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(AbortHandle);

impl AbortOnDrop {
    pub(crate) fn new<T>(task: &JoinHandle<T>) -> AbortOnDrop {
        AbortOnDrop(task.abort_handle())
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

//! A cancellation token that any thread may trigger; long operations poll it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A cancellation token. Clones share one flag; [`CancelToken::cancel`] may be called from any
/// thread, and the operation holding a clone stops at its next check with `CANCELLED`.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> Self {
        CancelToken::default()
    }
    /// Asks every holder to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
    /// Whether it was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

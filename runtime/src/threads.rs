//! A loaded program's own thread pool: sized by the caller, shared by the
//! program's kernels, matrix products and attention tiles, never rayon's
//! global pool, so two programs with different thread counts run side by
//! side without stealing each other's threads.

use crate::error::RuntimeError;

/// A pool of worker threads that calls run in.
pub struct ThreadPool {
    pool: rayon::ThreadPool,
}

impl ThreadPool {
    /// A pool of `threads` workers (0: one per available core).
    pub fn new(threads: usize) -> Result<ThreadPool, RuntimeError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("nax-worker-{i}"))
            .build()
            .map_err(|e| RuntimeError::ThreadPool { threads, message: e.to_string() })?;
        Ok(ThreadPool { pool })
    }

    /// How many workers it has.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Runs `f` inside the pool: parallel work `f` starts uses its workers.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool").field("threads", &self.threads()).finish()
    }
}

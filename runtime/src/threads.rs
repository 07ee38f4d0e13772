//! A loaded program's own thread pool: sized by the caller, shared by the
//! program's kernels, matrix products and attention tiles, never rayon's
//! global pool, so two programs with different thread counts run side by
//! side without stealing each other's threads. Dropping a pool waits for
//! its workers to exit, so nothing of the program's code runs after it is
//! dropped (an AOT library may be unloaded right after `NAME_close`).

use crate::error::RuntimeError;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// A pool of worker threads that calls run in.
pub struct ThreadPool {
    /// The workers; `None` for a pool of one, which is the calling thread.
    pool: Option<rayon::ThreadPool>,
    /// The workers' threads, joined on drop.
    workers: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

/// The most worker threads a pool may have: more is surely a mistake, and
/// would exhaust the process's threads (slowly) before failing.
pub const MAX_THREADS: usize = 1024;

impl ThreadPool {
    /// A pool of `threads` workers (0: one per available core; 1: the
    /// calling thread only, no thread is started); more than
    /// [`MAX_THREADS`] is an error, before any thread starts.
    pub fn new(threads: usize) -> Result<ThreadPool, RuntimeError> {
        if threads > MAX_THREADS {
            return Err(RuntimeError::ThreadPool { threads, message: format!("give 0 (one per core) or a count from 1 to {MAX_THREADS}") });
        }
        let workers: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        if threads == 1 {
            return Ok(ThreadPool { pool: None, workers });
        }
        let started = Arc::clone(&workers);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .spawn_handler(move |worker| {
                let name = format!("nax-worker-{}", worker.index());
                let handle = std::thread::Builder::new().name(name).spawn(move || worker.run())?;
                started.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(handle);
                Ok(())
            })
            .build()
            .map_err(|e| RuntimeError::ThreadPool { threads, message: e.to_string() })?;
        Ok(ThreadPool { pool: Some(pool), workers })
    }

    /// How many workers it has.
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(1, rayon::ThreadPool::current_num_threads)
    }

    /// Runs `f` inside the pool: parallel work `f` starts uses its workers
    /// (a pool of one runs `f` on the calling thread, and the runtime
    /// starts no parallel work with one thread).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        // Dropping rayon's pool tells its workers to exit; then wait for them.
        drop(self.pool.take());
        let workers = std::mem::take(&mut *self.workers.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        for w in workers {
            // A worker that panicked has exited too; there is nothing to report.
            let _ = w.join();
        }
    }
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool").field("threads", &self.threads()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::ThreadPool;

    #[test]
    fn a_pool_of_one_is_the_calling_thread_and_a_dropped_pool_has_exited() {
        let one = ThreadPool::new(1).unwrap();
        let caller = std::thread::current().id();
        assert_eq!(one.install(|| std::thread::current().id()), caller);
        let two = ThreadPool::new(2).unwrap();
        assert_eq!(two.threads(), 2);
        assert_ne!(two.install(|| std::thread::current().id()), caller);
        let workers = std::sync::Arc::clone(&two.workers);
        drop(two);
        assert!(workers.lock().unwrap().is_empty());
    }
}

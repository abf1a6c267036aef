//! A persistent thread pool for one stage (or one process's stages, which run one at a
//! time): `threads - 1` workers started once, plus the calling thread. A product hands the
//! pool a borrowed closure; workers spin briefly for the next one and then park, so a
//! decode step costs no thread spawn and no allocation.
//!
//! The caller never waits for a worker that has not started: a job is open until the
//! caller's own share returns, and a worker arriving after that skips it. So a worker
//! descheduled on a busy host delays a product only by the chunk it already holds.
//!
//! Work is handed out as chunks of an output slice ([`ThreadPool::for_each_chunk`]): each
//! chunk is one range of output rows, so a row's value never depends on the thread count.
//! Each thread first takes the chunks of its own share (the same rows in every call of the
//! same shape, so weights a thread has read stay in its core's cache), then helps with the
//! others' remaining chunks.
#![allow(unsafe_code)] // one lifetime erasure (`run`) and disjoint chunks (`for_each_chunk`)

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;

type Job = &'static (dyn Fn(usize) + Sync);

/// Kept on cache lines of its own (`align(128)`: a line pair, which the adjacent-line
/// prefetcher of x86 cores fetches together), so that the workers' polling of `epoch` never
/// shares a line with data the threads write, such as a product's output.
#[repr(align(128))]
struct Shared {
    /// Bumped once per job (and at shutdown).
    epoch: AtomicU64,
    /// The current job; `None` between jobs.
    job: RwLock<Option<Job>>,
    /// Workers inside the current job.
    active: AtomicUsize,
    /// Whether the current job still takes workers.
    open: AtomicBool,
    /// Workers parked on `wake`.
    sleepers: AtomicUsize,
    /// Whether a worker's share of the current job panicked.
    panicked: AtomicBool,
    stop: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

/// The persistent compute threads of a stage.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serializes jobs from several callers.
    gate: Mutex<()>,
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool").field("threads", &self.threads()).finish()
    }
}

/// Threads with a share of their own in [`ThreadPool::for_each_chunk`] (more share them).
const SHARES: usize = 32;

/// Spin iterations a worker waits for the next job before parking (tens of microseconds:
/// longer than the gap between two products of a block, much shorter than a token).
const SPIN: u32 = 4_000;

impl ThreadPool {
    /// A pool of `threads` compute threads in all (the caller counts as one; 0 means 1).
    /// A worker the system refuses to start is left out: the pool computes with fewer.
    pub fn new(threads: usize) -> ThreadPool {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            job: RwLock::new(None),
            active: AtomicUsize::new(0),
            open: AtomicBool::new(false),
            sleepers: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        let workers: Vec<_> = (1..threads.max(1))
            .map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("swactor-compute-{i}"))
                    .spawn(move || worker(&shared, i))
            })
            .filter_map(Result::ok)
            .collect();
        ThreadPool { shared, workers, gate: Mutex::new(()) }
    }

    /// Compute threads, the caller included.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Runs `f(t)` on the calling thread (`t` 0) and on every worker that arrives before
    /// that call returns (worker `t` of `1..threads`); returns when every started call has
    /// returned. `f` is a loop that claims work until none is left. A panic in any of them
    /// is raised here.
    pub fn run(&self, f: &(dyn Fn(usize) + Sync)) {
        if self.workers.is_empty() {
            f(0);
            return;
        }
        let _gate = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY: the reference is only reachable through `s.job` while this call runs. A
        // worker reads it only after registering in `active` and seeing the job `open`;
        // it drops its copy before leaving `active`. `Clear` (run also when `f` panics on
        // this thread) closes the job, waits until `active` is zero, then clears `job`, all
        // before this function returns. Every step is SeqCst, so a worker that registers
        // after the wait sees the job closed. No worker uses `f` after the borrow ends.
        let job: Job = unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), Job>(f) };
        struct Clear<'a>(&'a Shared);
        impl Drop for Clear<'_> {
            fn drop(&mut self) {
                self.0.open.store(false, Ordering::SeqCst);
                while self.0.active.load(Ordering::SeqCst) != 0 {
                    std::hint::spin_loop();
                }
                *self.0.job.write().unwrap_or_else(|e| e.into_inner()) = None;
            }
        }
        *s.job.write().unwrap_or_else(|e| e.into_inner()) = Some(job);
        s.open.store(true, Ordering::SeqCst);
        s.epoch.fetch_add(1, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        {
            let _clear = Clear(s);
            f(0);
        }
        if s.panicked.swap(false, Ordering::SeqCst) {
            panic!("a compute thread panicked");
        }
    }

    /// Splits `data` into chunks of `chunk` elements and calls `f(index, chunk)` for each,
    /// spread over the pool's threads. Chunk `i` starts at element `i * chunk`.
    pub fn for_each_chunk<T: Send>(
        &self,
        data: &mut [T],
        chunk: usize,
        f: &(dyn Fn(usize, &mut [T]) + Sync),
    ) {
        let chunk = chunk.max(1);
        if self.workers.is_empty() || data.len() <= chunk {
            for (i, c) in data.chunks_mut(chunk).enumerate() {
                f(i, c);
            }
            return;
        }
        let len = data.len();
        let count = len.div_ceil(chunk);
        let base = SharedSlice(data.as_mut_ptr());
        // Share `h` holds chunks `bound(h)..bound(h + 1)`; its cursor is the next unclaimed.
        let shares = self.threads().min(SHARES).min(count);
        let bound = |h: usize| h * count / shares;
        let next: [AtomicUsize; SHARES] = std::array::from_fn(|h| AtomicUsize::new(bound(h)));
        self.run(&|t| {
            // Its own share first, then the others' leftovers in turn.
            for h in (0..shares).map(|k| (t + k) % shares) {
                let end = bound(h + 1);
                loop {
                    let i = next[h].fetch_add(1, Ordering::Relaxed);
                    if i >= end {
                        break;
                    }
                    let start = i * chunk;
                    let n = chunk.min(len - start);
                    // SAFETY: `fetch_add` hands each index of share `h` to exactly one
                    // call, and the shares are disjoint, so chunk `i` (elements
                    // `start..start + n`, inside `data`) is borrowed mutably once;
                    // `data`'s exclusive borrow outlives `run`, which returns only after
                    // every call has.
                    let c = unsafe { std::slice::from_raw_parts_mut(base.at(start), n) };
                    f(i, c);
                }
            }
        });
    }
}

impl ThreadPool {
    /// Rows per task for per-row work over `rows` rows of `row_len` values: about two tasks
    /// per thread, a multiple of `unit`, and one task when the work is small (a decode
    /// step's hand-out would cost more than its work). Only scheduling depends on it.
    pub fn batch_rows_per_task(&self, rows: usize, row_len: usize, unit: usize) -> usize {
        if self.threads() <= 1 || rows * row_len < 64 * 1024 {
            return rows.max(1);
        }
        rows.div_ceil(2 * self.threads()).next_multiple_of(unit.max(1))
    }

    /// Splits `data` into consecutive spans of `lens` elements (their sum at most
    /// `data.len()`) and calls `f(index, span)` for each, spread over the pool's threads:
    /// work of uneven parts (each selected expert's rows) in one hand-out.
    pub fn for_each_span<T: Send>(
        &self,
        data: &mut [T],
        lens: &[usize],
        f: &(dyn Fn(usize, &mut [T]) + Sync),
    ) {
        let mut rest = data;
        let mut spans = Vec::with_capacity(lens.len());
        for &l in lens {
            let (span, tail) = std::mem::take(&mut rest).split_at_mut(l);
            spans.push(span);
            rest = tail;
        }
        if self.workers.is_empty() || spans.len() <= 1 {
            for (i, span) in spans.into_iter().enumerate() {
                f(i, span);
            }
            return;
        }
        let spans = Mutex::new(spans.into_iter().enumerate());
        self.run(&|_| {
            loop {
                let next = spans.lock().unwrap_or_else(|e| e.into_inner()).next();
                match next {
                    Some((i, span)) => f(i, span),
                    None => break,
                }
            }
        });
    }
}

/// The base of a slice whose disjoint chunks the pool's threads borrow one each.
struct SharedSlice<T>(*mut T);

// SAFETY: the pointer is only turned into disjoint chunks, each borrowed by one thread at
// a time (`for_each_chunk`); `T: Send` lets a chunk move to another thread.
unsafe impl<T: Send> Sync for SharedSlice<T> {}

impl<T> SharedSlice<T> {
    /// The pointer to element `at` (inside the slice: the caller checks).
    fn at(&self, at: usize) -> *mut T {
        self.0.wrapping_add(at)
    }
}

/// Worker `index` (from 1; the caller of `run` is 0).
fn worker(s: &Shared, index: usize) {
    let mut seen = 0u64;
    loop {
        let mut spins = 0u32;
        while s.epoch.load(Ordering::Acquire) == seen {
            if spins < SPIN {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            let mut g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.sleepers.fetch_add(1, Ordering::SeqCst);
            while s.epoch.load(Ordering::SeqCst) == seen {
                g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            s.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
        seen = s.epoch.load(Ordering::SeqCst);
        if s.stop.load(Ordering::SeqCst) {
            return;
        }
        s.active.fetch_add(1, Ordering::SeqCst);
        if s.open.load(Ordering::SeqCst) && s.epoch.load(Ordering::SeqCst) == seen {
            let job = *s.job.read().unwrap_or_else(|e| e.into_inner());
            if let Some(job) = job
                && std::panic::catch_unwind(AssertUnwindSafe(|| job(index))).is_err()
            {
                s.panicked.store(true, Ordering::SeqCst);
            }
        }
        s.active.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        let s = &*self.shared;
        s.stop.store(true, Ordering::SeqCst);
        s.epoch.fetch_add(1, Ordering::SeqCst);
        {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_chunk_is_visited_once_whatever_the_thread_count() {
        for threads in 1..=3 {
            let pool = ThreadPool::new(threads);
            for round in 0..50 {
                let mut data = vec![0u32; 1000 + round];
                pool.for_each_chunk(&mut data, 7, &|i, c| {
                    for (k, v) in c.iter_mut().enumerate() {
                        *v += (i * 7 + k) as u32 + 1;
                    }
                });
                assert!(data.iter().enumerate().all(|(i, &v)| v == i as u32 + 1));
            }
        }
    }

    #[test]
    fn a_panicking_task_is_raised_in_the_caller_and_the_pool_still_works() {
        let pool = ThreadPool::new(2);
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let mut data = vec![0u8; 64];
            pool.for_each_chunk(&mut data, 1, &|i, _| assert!(i != 40, "boom"));
        }));
        assert!(r.is_err());
        let mut data = vec![0u8; 64];
        pool.for_each_chunk(&mut data, 1, &|_, c| c[0] = 1);
        assert!(data.iter().all(|&v| v == 1));
    }

    #[test]
    fn each_thread_starts_on_its_own_share_of_the_chunks_so_it_rereads_the_same_rows() {
        let pool = ThreadPool::new(2);
        for _ in 0..20 {
            // The first chunk each thread takes waits until both have taken one, so neither
            // can finish its share and take from the other's before the other starts.
            let firsts = Mutex::new(Vec::new());
            let joined = AtomicUsize::new(0);
            let mut data = vec![0u8; 4];
            pool.for_each_chunk(&mut data, 1, &|i, _| {
                let me = std::thread::current().id();
                let mut f = firsts.lock().unwrap();
                if f.iter().any(|(t, _)| *t == me) {
                    return;
                }
                f.push((me, i));
                drop(f);
                joined.fetch_add(1, Ordering::SeqCst);
                while joined.load(Ordering::SeqCst) < 2 {
                    std::hint::spin_loop();
                }
            });
            let mut starts: Vec<usize> = firsts.into_inner().unwrap().iter().map(|f| f.1).collect();
            starts.sort();
            assert_eq!(starts, [0, 2], "the caller starts at chunk 0, the worker at its share's");
        }
    }

    #[test]
    fn a_job_is_shared_with_workers_that_arrive_while_it_is_open() {
        let pool = ThreadPool::new(3);
        // The caller's share does not return before a worker has joined the job, so the
        // job is only complete if the pool shared it (parked workers are woken).
        for _ in 0..20 {
            let used = Mutex::new(std::collections::HashSet::new());
            let joined = AtomicUsize::new(0);
            pool.run(&|_| {
                used.lock().unwrap().insert(std::thread::current().id());
                joined.fetch_add(1, Ordering::SeqCst);
                while joined.load(Ordering::SeqCst) < 2 {
                    std::hint::spin_loop();
                }
            });
            assert!(used.lock().unwrap().len() >= 2);
        }
    }
}

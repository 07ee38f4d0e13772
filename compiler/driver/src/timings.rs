//! The time of each stage of the pipeline (parse, check, lower, rewrite,
//! kernels, codegen, link, run), which `nax --timings` prints.

use std::time::{Duration, Instant};

/// Stage times, in the order they ran.
#[derive(Clone, Debug)]
pub struct Timings {
    stages: Vec<(&'static str, Duration)>,
    last: Instant,
}

impl Timings {
    /// A clock started now, with no stage recorded.
    pub fn start() -> Timings {
        Timings { stages: Vec::new(), last: Instant::now() }
    }

    /// Records stages timed elsewhere, and restarts the clock.
    pub fn extend(&mut self, stages: &[(&'static str, Duration)]) {
        self.stages.extend_from_slice(stages);
        self.last = Instant::now();
    }

    /// Records the time since the previous stage ended as `stage`; a
    /// stage that ran before (one per function of a module built ahead
    /// of time) adds to its first entry.
    pub fn mark(&mut self, stage: &'static str) {
        let now = Instant::now();
        match self.stages.iter_mut().find(|(s, _)| *s == stage) {
            Some((_, d)) => *d += now - self.last,
            None => self.stages.push((stage, now - self.last)),
        }
        self.last = now;
    }

    /// The table printed by `--timings`.
    pub fn report(&self, backend: &str) -> String {
        let mut out = format!("timings ({backend} back end):\n");
        let mut total = Duration::ZERO;
        for (stage, d) in &self.stages {
            out.push_str(&format!("  {stage:<8} {:>10.3} ms\n", d.as_secs_f64() * 1e3));
            total += *d;
        }
        out.push_str(&format!("  {:<8} {:>10.3} ms\n", "total", total.as_secs_f64() * 1e3));
        out
    }
}

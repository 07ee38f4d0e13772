//! One workload's nax side for `benches/compare.py`, kept alive so that
//! its measurements interleave with PyTorch's and the C triad's.
//!
//!     cargo build --release --example bench_worker
//!     target/release/examples/bench_worker NAME [THREADS]
//!
//! NAME is a workload of `benches/workloads.rs` (a file of
//! `examples/workloads/`, or `elementwise`), set up by the same code
//! (`benches/support/workloads.rs`): compiled once with the LLVM back end,
//! optimizer on, on seeded arguments and weights, in a pool of THREADS
//! workers (0, the default: one per available core). It is also compiled
//! once with Cranelift, only to time it. After one warm-up call it prints
//!
//!     {"ready": true, "compile_ms": {"llvm": .., "cranelift": ..}, "threads": N}
//!
//! (compile times source to callable) and then serves lines of stdin:
//! `measure SECONDS` calls the function repeatedly for about that long
//! (at least 3 calls; each call allocates its output, as a user's call
//! does) and prints `{"median_ms": .., "min_ms": .., "calls": N}`; `quit`
//! or the end of stdin exits. `memory CALLS` resets the process's peak
//! resident memory (Linux's `/proc/self/clear_refs`), makes that many
//! calls and prints `{"peak_rss_bytes": .., "plan_bytes": ..,
//! "packed_bytes": ..}`: the process's peak over those calls (its
//! weights, packed panels and everything else resident included), the
//! memory plan's figure for one call (`Function::peak`) and the bytes of
//! the weights' packed panels.
//!
//!     target/release/examples/bench_worker --source NAME
//!
//! prints the workload's source and exits (`benches/compare.py` emits the
//! PyTorch code of the bf16 variants from it).

use nax::pipeline::Backend;
use nax_runtime::ThreadPool;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

#[path = "support/workloads.rs"]
mod workloads;

/// The allocator of the `nax` command, as `benches/workloads.rs` has.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut argv = std::env::args().skip(1);
    let usage = "usage: bench_worker NAME [THREADS] | bench_worker --source NAME";
    let mut name = argv.next().unwrap_or_else(|| fail(usage));
    let print_source = name == "--source";
    if print_source {
        name = argv.next().unwrap_or_else(|| fail(usage));
    }
    let threads = argv.next().map_or(0, |t| t.parse().unwrap_or_else(|_| fail(usage)));
    let all = workloads::all();
    let Some(w) = all.iter().find(|w| w.name == name) else {
        let names: Vec<&str> = all.iter().map(|w| w.name.as_str()).collect();
        fail(&format!("no workload {name}; the workloads: {}", names.join(", ")));
    };
    if print_source {
        print!("{}", w.source);
        return;
    }
    let (f, llvm_ms) = w.compile(Backend::Llvm);
    let (_, cranelift_ms) = w.compile(Backend::Cranelift);
    let program = w.program(f);
    let pool = ThreadPool::new(threads).unwrap_or_else(|e| fail(&format!("thread pool: {e}")));
    let call = program.check();
    drop(program.run(&call, &pool));
    let mut out = std::io::stdout().lock();
    let ready = format!("{{\"ready\": true, \"compile_ms\": {{\"llvm\": {llvm_ms:.3}, \"cranelift\": {cranelift_ms:.3}}}, \"threads\": {}}}", pool.threads());
    reply(&mut out, &ready);
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap_or_else(|e| fail(&format!("stdin: {e}")));
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["measure", seconds] => {
                let seconds: f64 = seconds.parse().ok().filter(|s: &f64| s.is_finite() && *s >= 0.0).unwrap_or_else(|| fail(&format!("bad line: {line}")));
                let budget = Duration::from_secs_f64(seconds);
                let mut times = Vec::new();
                let start = Instant::now();
                while times.len() < 3 || start.elapsed() < budget {
                    let t = Instant::now();
                    drop(program.run(&call, &pool));
                    times.push(t.elapsed().as_secs_f64() * 1e3);
                }
                times.sort_by(f64::total_cmp);
                let n = times.len();
                let median = if n % 2 == 1 { times[n / 2] } else { (times[n / 2 - 1] + times[n / 2]) / 2.0 };
                reply(&mut out, &format!("{{\"median_ms\": {median:.6}, \"min_ms\": {:.6}, \"calls\": {n}}}", times[0]));
            }
            ["memory", calls] => {
                let calls: usize = calls.parse().unwrap_or_else(|_| fail(&format!("bad line: {line}")));
                std::fs::write("/proc/self/clear_refs", "5").unwrap_or_else(|e| fail(&format!("cannot reset the peak resident memory: {e}")));
                for _ in 0..calls {
                    drop(program.run(&call, &pool));
                }
                let status = std::fs::read_to_string("/proc/self/status").unwrap_or_else(|e| fail(&format!("/proc/self/status: {e}")));
                let kib: u64 = status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                    .unwrap_or_else(|| fail("no VmHWM in /proc/self/status"));
                reply(
                    &mut out,
                    &format!(
                        "{{\"peak_rss_bytes\": {}, \"plan_bytes\": {}, \"packed_bytes\": {}}}",
                        kib * 1024,
                        program.f.peak(&call).unwrap_or_else(|e| fail(&format!("peak: {e}"))).bytes,
                        program.weights.packed_weights().bytes()
                    ),
                );
            }
            ["quit"] => return,
            _ => fail(&format!("bad line: {line}")),
        }
    }
}

/// One JSON line on stdout, flushed: the reader waits for it.
fn reply(out: &mut impl Write, line: &str) {
    writeln!(out, "{line}").and_then(|()| out.flush()).unwrap_or_else(|e| fail(&format!("stdout: {e}")));
}

fn fail(message: &str) -> ! {
    eprintln!("bench_worker: {message}");
    std::process::exit(2)
}

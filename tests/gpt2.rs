//! GPT-2 end to end against transformers' reference implementation:
//! `examples/gpt2/reference.py` builds a small GPT2LMHeadModel with random
//! weights (no download), converts its checkpoint with convert.py, and
//! records the reference's prefill logits, its decoding step through
//! `past_key_values`, and its greedy continuation; nax's `gpt2`, `step`
//! and `next_token` (examples/gpt2/gpt2.nax, on every CPU back end) must
//! agree at CLI.md's tolerances, and greedy generation token for token,
//! from Rust and from C (examples/gpt2/decode.c).
//! Skipped, with a message, where python3 cannot import transformers.

use crate::backends::compare;
use crate::support::root;
use nax::{Arg, Backend, Engine, HostTensor, TensorData, TensorView};
use std::collections::HashMap;
use std::process::Command;

/// The python with transformers: `NAX_PYTHON`, else `python3`.
fn python() -> String {
    std::env::var("NAX_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn f32s(t: &HostTensor) -> Vec<f32> {
    t.to_f64_vec().into_iter().map(|v| v as f32).collect()
}

fn tokens(ids: &[i64]) -> HostTensor {
    HostTensor::new(TensorData::I64(ids.to_vec()), vec![1, ids.len()], vec![None, None]).expect("tokens")
}

/// The key/value caches of gpt2.nax's step, preallocated `[L 1 H capacity
/// Dh]` each: a step reads the first `len` positions (a strided view, no
/// copy) and its new keys and values are written after them.
struct Cache {
    keys: Vec<f32>,
    values: Vec<f32>,
    len: usize,
    capacity: usize,
    heads: usize,
    depth: usize,
}

const LAYERS: usize = 12;

impl Cache {
    fn new(capacity: usize, heads: usize, depth: usize) -> Cache {
        let size = LAYERS * heads * capacity * depth;
        Cache { keys: vec![0.0; size], values: vec![0.0; size], len: 0, capacity, heads, depth }
    }

    /// The first `len` positions of a cache, in place.
    fn view<'a>(&self, data: &'a [f32]) -> TensorView<'a> {
        let shape = vec![LAYERS, 1, self.heads, self.len, self.depth];
        let strides = vec![(self.heads * self.capacity * self.depth) as isize, 0, (self.capacity * self.depth) as isize, self.depth as isize, 1];
        TensorView::strided(data, 0, shape, strides, vec![None; 5]).expect("a view of the cache")
    }

    /// Writes a step's new keys and values (`[L 1 H n Dh]` each) after the cached ones.
    fn append(&mut self, k: &HostTensor, v: &HostTensor) {
        let n = k.shape()[3];
        assert!(self.len + n <= self.capacity, "the cache is full");
        let (k, v) = (f32s(k), f32s(v));
        for l in 0..LAYERS {
            for h in 0..self.heads {
                for c in 0..n {
                    let from = ((l * self.heads + h) * n + c) * self.depth;
                    let to = ((l * self.heads + h) * self.capacity + self.len + c) * self.depth;
                    self.keys[to..to + self.depth].copy_from_slice(&k[from..from + self.depth]);
                    self.values[to..to + self.depth].copy_from_slice(&v[from..from + self.depth]);
                }
            }
        }
        self.len += n;
    }
}

fn argmax(row: &[f32]) -> i64 {
    row.iter().enumerate().fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &v)| if v > bv { (i, v) } else { (bi, bv) }).0 as i64
}

fn call(f: &nax::Function, args: &[(&str, &HostTensor)]) -> HostTensor {
    f.call(args.iter().map(|(n, t)| (*n, Arg::from(t.view())))).unwrap_or_else(|e| panic!("{}: {e}", f.signature().name))
}

#[test]
fn gpt2_agrees_with_transformers() {
    let python = python();
    let probe = Command::new(&python).args(["-c", "import torch, transformers, safetensors"]).output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        println!("skipped: {python} cannot import torch, transformers and safetensors (set NAX_PYTHON to a python that can)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("nax-gpt2-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let script = root().join("examples/gpt2/reference.py");
    let made = Command::new(&python).arg(&script).arg(&dir).output().expect("run reference.py");
    assert!(made.status.success(), "reference.py failed:\n{}", String::from_utf8_lossy(&made.stderr));
    let reference: HashMap<String, HostTensor> = nax::read_tensors(&dir.join("reference.safetensors")).unwrap().into_iter().collect();
    let gradients: HashMap<String, HostTensor> = nax::read_tensors(&dir.join("gradients.safetensors")).unwrap().into_iter().collect();
    // The reference model's layers (convert.py pads to 12 with layers that add nothing).
    let layers = 2;
    // Every back end: the prefill, the step's named results, and greedy generation.
    for backend in [Backend::Interp, Backend::Cranelift, Backend::Mlir, Backend::Llvm] {
        let program = Engine::new()
            .backend(backend)
            .compile_file(&dir.join("gpt2.nax"))
            .expect("gpt2.nax checks")
            .with_weights_file(&dir.join("weights.safetensors"))
            .expect("the weights bind");
        println!("{}:", backend.name());
        run(&program, &reference);
        trains_as_transformers(&program, &reference["prompt"], &gradients, layers);
    }
    let program = Engine::new().compile_file(&dir.join("gpt2.nax")).unwrap().with_weights_file(&dir.join("weights.safetensors")).unwrap();
    c_decodes_greedily(&dir, &reference);
    bf16_agrees_with_f32(&dir, &program, &reference["prompt"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `train_step` (the next-token cross entropy of the prompt and its
/// gradient by every parameter) against transformers'
/// `GPT2LMHeadModel(labels=prompt)` and `backward()`: the loss, and each
/// gradient within 1e-4 of its scale (its largest magnitude), over the
/// reference's own layers (the padding layers have no counterpart).
fn trains_as_transformers(program: &nax::Program, prompt: &HostTensor, gradients: &HashMap<String, HostTensor>, layers: usize) {
    let ids: Vec<i64> = prompt.to_f64_vec().iter().map(|&x| x as i64).collect();
    let (inputs, targets) = (tokens(&ids[..ids.len() - 1]), tokens(&ids[1..]));
    let step = program.function("train_step").unwrap();
    let results = step.call_results([("tokens", Arg::from(inputs.view())), ("targets", Arg::from(targets.view()))]).unwrap();
    let (loss, want) = (results[0].1.to_f64_vec()[0], gradients["loss"].to_f64_vec()[0]);
    assert!((loss - want).abs() <= 1e-4 * want.abs(), "loss {loss}, transformers {want}");
    for (name, got) in &results[1..] {
        let want = &gradients[name.as_str()];
        assert_eq!(got.shape(), want.shape(), "{name}");
        // Per-layer gradients: the reference's layers only.
        let stacked = got.names().first().is_some_and(|n| n.as_deref() == Some("L"));
        let keep = if stacked { got.len() / got.shape()[0] * layers } else { got.len() };
        let (got, want) = (&got.to_f64_vec()[..keep], &want.to_f64_vec()[..keep]);
        let scale = want.iter().fold(0.0f64, |m, w| m.max(w.abs()));
        let worst = got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0f64, f64::max);
        assert!(worst <= 1e-4 * scale, "{name}: differs from transformers' by {worst:.3e}, over 1e-4 of its scale {scale:.3e}");
    }
    println!("  train_step: loss {loss:.6} (transformers {want:.6}), {} gradients within 1e-4 of their scale", results.len() - 1);
}

/// examples/gpt2/decode.c, built against the library of the model, gives
/// transformers' greedy continuation (through `step`'s typed entry, its
/// caches preallocated and written in place); and so does the same host
/// over two MPI processes (`mpirun -np 2`), against the library built split
/// by heads and features (`--mesh tp=2 --shard H=tp,F=tp`), its
/// collectives run by MPI (examples/host_mpi/nax_mpi.h).
fn c_decodes_greedily(dir: &std::path::Path, reference: &HashMap<String, HostTensor>) {
    // The reference's configuration: 4 heads of 32, a vocabulary of 1000.
    let [heads, depth, vocab] = [reference["k_cache"].shape()[2], reference["k_cache"].shape()[4], reference["logits"].shape()[2]];
    let want: Vec<String> = reference["generated"].to_f64_vec().iter().map(|&x| (x as i64).to_string()).collect();
    let prompt: Vec<String> = reference["prompt"].to_f64_vec().iter().map(|&x| (x as i64).to_string()).collect();
    let mpi = Command::new("mpicc").arg("--version").output().is_ok_and(|o| o.status.success());
    if !mpi {
        eprintln!("skipped: decode.c over MPI needs Open MPI (mpicc, mpirun: apt-get install openmpi-bin libopenmpi-dev); .ci/test installs it");
    }
    for tp in if mpi { vec![1, 2] } else { vec![1] } {
        let sub = dir.join(format!("tp{tp}"));
        std::fs::create_dir_all(&sub).unwrap();
        let mesh = format!("tp={tp}");
        let split = if tp > 1 { vec!["--mesh", mesh.as_str(), "--shard", "H=tp,F=tp"] } else { Vec::new() };
        let lib = crate::aot::build(&dir.join("gpt2.nax"), &sub, "gpt2", &split);
        let exe = sub.join("decode");
        let out = Command::new(if tp > 1 { "mpicc" } else { "cc" })
            .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
            .arg(&sub)
            .arg("-I")
            .arg(root().join("examples/host_mpi"))
            .args([format!("-DGPT2_H={heads}"), format!("-DGPT2_DH={depth}"), format!("-DGPT2_V={vocab}"), format!("-DGPT2_TP={tp}")])
            .arg(root().join("examples/gpt2/decode.c"))
            .arg("-o")
            .arg(&exe)
            .arg(&lib)
            .arg(format!("-Wl,-rpath,{}", sub.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut run = if tp > 1 {
            let mut c = Command::new("mpirun");
            c.args(["-np", &tp.to_string(), "--allow-run-as-root", "--oversubscribe"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let run = run.arg(dir.join("weights.safetensors")).arg(want.len().to_string()).args(&prompt).output().unwrap();
        assert!(run.status.success(), "decode.c over {tp} process(es): {}", String::from_utf8_lossy(&run.stderr));
        assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), want.join(" "), "decode.c's greedy tokens over {tp} process(es)");
        println!("  decode.c over {tp} process(es): transformers' greedy tokens");
    }
    if mpi {
        split_speedup_runs(dir, reference);
    }
}

/// benches/gpt2_split.c (the split prefill's speed-up through the C ABI
/// and MPI) builds against a whole and a split library of the model and
/// prints its measurement: one round, here for its code, not its numbers.
fn split_speedup_runs(dir: &std::path::Path, reference: &HashMap<String, HostTensor>) {
    let [layers, heads, depth] = [0, 2, 4].map(|a| reference["k_cache"].shape()[a]);
    let vocab = reference["logits"].shape()[2];
    let (whole, split) = (dir.join("tp1"), dir.join("tp2"));
    let lib = crate::aot::build(&dir.join("gpt2.nax"), &split, "gpt2tp", &["--mesh", "tp=2", "--shard", "H=tp,F=tp"]);
    let exe = split.join("gpt2_split");
    let out = Command::new("mpicc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(&whole)
        .arg("-I")
        .arg(&split)
        .arg("-I")
        .arg(root().join("examples/host_mpi"))
        .args([format!("-DGPT2_L={layers}"), format!("-DGPT2_D={}", heads * depth), format!("-DGPT2_V={vocab}")])
        .arg(root().join("benches/gpt2_split.c"))
        .arg("-o")
        .arg(&exe)
        .arg(whole.join("libgpt2.so"))
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}:{}", whole.display(), split.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new("mpirun")
        .args(["-np", "2", "--allow-run-as-root", "--oversubscribe"])
        .arg(&exe)
        .arg(dir.join("weights.safetensors"))
        .args(["1", "8"])
        .output()
        .unwrap();
    assert!(run.status.success(), "gpt2_split: {}", String::from_utf8_lossy(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert!(report["speedup"].as_f64().is_some_and(|x| x > 0.0), "{report}");
    // The collectives it times alone are the plan's: Megatron's two
    // all-reduces per layer, the head's (split along D by the compiler) and
    // the embedding rows' all-gather.
    let plan = Command::new(env!("CARGO_BIN_EXE_nax"))
        .arg("plan")
        .arg(dir.join("gpt2.nax"))
        .args(["--fn", "gpt2", "--mesh", "tp=2", "--shard", "H=tp,F=tp"])
        .output()
        .unwrap();
    assert!(plan.status.success(), "nax plan: {}", String::from_utf8_lossy(&plan.stderr));
    let (reduces, gathers) = (report["all_reduces"].as_u64().unwrap(), report["all_gathers"].as_u64().unwrap());
    let counts = format!("collectives per call: {} ({reduces} all-reduces, {gathers} all-gathers)", reduces + gathers);
    assert_eq!(String::from_utf8_lossy(&plan.stdout).lines().last(), Some(counts.as_str()), "{report}");
    assert_eq!(reduces, 2 * layers as u64 + 1, "{report}");
    println!("  benches/gpt2_split.c over 2 processes: {report}");
}

/// The same model with bf16 parameters (gpt2.nax's bf16 variant, its
/// weights rounded to bf16): prefill logits within 2% of the f32 logits'
/// scale (their largest magnitude, at least 1) of the f32 model's, on the
/// AMX tiles where the CPU has them, else widened to f32. The bound scales
/// with the logits because bf16 keeps 8 significant bits: with
/// transformers 5.25's initialisation the reference's logits reach 4.3, and
/// rounding the weights alone to bf16 moves them by 2.4e-2, bf16
/// activations by 5e-2 more (an absolute 2e-2 suits GPT-2's own scale only).
fn bf16_agrees_with_f32(dir: &std::path::Path, program: &nax::Program, prompt: &HostTensor) {
    let source = std::fs::read_to_string(dir.join("gpt2.nax")).unwrap();
    let weights = nax::read_tensors(&dir.join("weights.safetensors")).unwrap().into_iter().map(|(name, t)| {
        let data = TensorData::BF16(f32s(&t).into_iter().map(half::bf16::from_f32).collect());
        (name, HostTensor::new(data, t.shape().to_vec(), t.names().to_vec()).expect("a bf16 weight"))
    });
    let bf16 =
        Engine::new().compile(&crate::variants::bf16_variant(&source)).expect("the bf16 variant checks").with_weights(weights).expect("bf16 weights bind");
    let want = f32s(&call(&program.function("gpt2").unwrap(), &[("tokens", prompt)]));
    let got = f32s(&call(&bf16.function("gpt2").unwrap(), &[("tokens", prompt)]));
    let worst = got.iter().zip(&want).map(|(g, w)| (g - w).abs()).fold(0.0f32, f32::max);
    let scale = want.iter().fold(1.0f32, |m, w| m.max(w.abs()));
    println!("bf16 prefill logits: largest difference from f32 {worst:.3e}, logits' scale {scale:.3} (matrix tiles: {})", nax_runtime::matrix_tiles());
    assert!(worst <= 2e-2 * scale, "bf16 logits differ from f32's by {worst}, over 2% of their scale {scale}");
}

fn run(program: &nax::Program, reference: &HashMap<String, HostTensor>) {
    let prompt = &reference["prompt"];
    let logits = &reference["logits"];
    let vocab = logits.shape()[2];
    // The prefill: logits at every position.
    let gpt2 = program.function("gpt2").unwrap();
    let ours = call(&gpt2, &[("tokens", prompt)]);
    compare("prefill logits", &ours, logits, 128).unwrap();
    // The greedy next token.
    let next = call(&program.function("next_token").unwrap(), &[("tokens", prompt)]);
    assert_eq!(next.to_f64_vec(), reference["next"].to_f64_vec()[..1], "next_token");
    // The decoding step through the reference's own cache: its results by name.
    let step = program.function("step").unwrap();
    let (k, v) = (&reference["k_cache"], &reference["v_cache"]);
    let next_ids: Vec<i64> = reference["next"].to_f64_vec().iter().map(|&x| x as i64).collect();
    let next_tokens = tokens(&next_ids);
    let results = step.call_results([("tokens", Arg::from(next_tokens.view())), ("k_cache", Arg::from(k.view())), ("v_cache", Arg::from(v.view()))]).unwrap();
    let names: Vec<&str> = results.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["logits", "k", "v"]);
    compare("decode-step logits", &results[0].1, &reference["step_logits"], 128).unwrap();
    assert_eq!(results[1].1.names(), [Some("L".into()), Some("b".into()), Some("H".into()), Some("n".into()), Some("Dh".into())]);
    // Greedy generation with nax's own cache, from an empty one,
    // preallocated and written in place after each step.
    let [heads, depth] = [k.shape()[2], k.shape()[4]];
    let mut input: Vec<i64> = prompt.to_f64_vec().iter().map(|&x| x as i64).collect();
    let mut generated = Vec::new();
    let want: Vec<i64> = reference["generated"].to_f64_vec().iter().map(|&x| x as i64).collect();
    let mut cache = Cache::new(input.len() + want.len(), heads, depth);
    while generated.len() < want.len() {
        let ids = tokens(&input);
        let results = step
            .call_results([
                ("tokens", Arg::from(ids.view())),
                ("k_cache", Arg::from(cache.view(&cache.keys))),
                ("v_cache", Arg::from(cache.view(&cache.values))),
            ])
            .unwrap();
        let logits = f32s(&results[0].1);
        let last = &logits[(input.len() - 1) * vocab..input.len() * vocab];
        cache.append(&results[1].1, &results[2].1);
        let token = argmax(last);
        generated.push(token);
        input = vec![token];
    }
    println!("prompt    {:?}", prompt.to_f64_vec().iter().map(|&x| x as i64).collect::<Vec<_>>());
    println!("nax       {generated:?}");
    println!("reference {want:?}");
    assert_eq!(generated, want, "greedy generation");
}

//! A host application embedding nax: JIT-compile the example transformer
//! block, bind its weights from a safetensors checkpoint, and call it from
//! four threads at once, each with its own batch, borrowing the caller's
//! memory.
//!
//!     cargo run --release --example host_rust [-- MODEL.nax [CHECKPOINT.safetensors]]
//!
//! Without a checkpoint, one with seeded weights of the right shapes is
//! written to a temporary folder first (as a training script would).

use nax::{Engine, HostTensor, TensorData, TensorView};
use std::path::PathBuf;
use std::time::Instant;

/// A seeded value in [-0.05, 0.05) for position `i` of tensor `seed`.
fn seeded(seed: u64, i: u64) -> f32 {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    s ^= s >> 31;
    s = s.wrapping_mul(0x94d0_49bb_1331_11eb);
    s ^= s >> 29;
    ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut args = std::env::args().skip(1);
    let model = args.next().map_or_else(|| root.join("examples/transformer_block.nax"), PathBuf::from);

    // One engine per application: LLVM for this CPU, 4 worker threads per program.
    let engine = Engine::new().threads(4);
    let start = Instant::now();
    let program = engine.compile_file(&model)?;
    let block = program.function("block")?;
    println!("compiled {} in {:.0} ms: {}", model.display(), start.elapsed().as_secs_f64() * 1e3, block.signature());

    // The checkpoint: given, or written with seeded weights of the declared shapes.
    let checkpoint = match args.next() {
        Some(path) => PathBuf::from(path),
        None => {
            let dir = std::env::temp_dir().join(format!("nax-host-rust-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let path = dir.join("block.safetensors");
            let mut tensors = Vec::new();
            for (k, w) in block.signature().weights.iter().enumerate() {
                let shape: Vec<usize> =
                    w.ty.axes
                        .iter()
                        .map(|a| match a.size {
                            nax::Size::Const(c) => Ok(c as usize),
                            nax::Size::Sym(_) => Err(format!("weight '{}' has a size known only at run time", w.name)),
                        })
                        .collect::<Result<_, _>>()?;
                let values = (0..shape.iter().product::<usize>() as u64).map(|i| seeded(k as u64, i)).collect();
                tensors.push((w.name.clone(), HostTensor::new(TensorData::F32(values), shape, w.ty.names())?));
            }
            let refs: Vec<(&str, &HostTensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
            nax::write_tensors_atomic(&path, &refs)?;
            path
        }
    };
    let program = program.with_weights_file(&checkpoint)?;
    let block = program.function("block")?;

    // Four threads, each calling the same compiled block on its own batch.
    let (b, n, d) = (2usize, 16usize, 512usize);
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4u64)
            .map(|t| {
                let block = block.clone();
                s.spawn(move || -> Result<(u64, f64, f64), nax::Error> {
                    let x: Vec<f32> = (0..(b * n * d) as u64).map(|i| seeded(100 + t, i) * 20.0).collect();
                    let view = TensorView::new(&x, vec![b, n, d], vec![Some("b".into()), Some("n".into()), Some("D".into())])?;
                    let start = Instant::now();
                    let y = block.call([("x", view.into())])?;
                    let ms = start.elapsed().as_secs_f64() * 1e3;
                    let values = y.to_f64_vec();
                    let checksum = values.iter().sum::<f64>();
                    assert_eq!(y.shape(), &[b, n, d]);
                    Ok((t, checksum, ms))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a caller thread panicked")).collect::<Result<Vec<_>, _>>()
    })?;
    for (t, checksum, ms) in results {
        println!("thread {t}: out [b={b} n={n} D={d}], checksum {checksum:.6}, {ms:.1} ms");
    }
    Ok(())
}

//! Fuzz target: the C ABI's validation of a DLPack descriptor
//! (`nax_capi::tensor`, which every tensor of a C or Python caller goes
//! through). Any rank, dtype, sizes, strides and byte offset, over a
//! buffer whose true size is given as the capacity: validation ends in an
//! error, or in a view (or a copy) every element of which is read here,
//! inside the buffer (AddressSanitizer and libFuzzer see any read outside).

#![no_main]

use libfuzzer_sys::fuzz_target;
use nax_capi::{DLDataType, DLDevice, DLTensor, Input, nax_dtype, tensor};

/// Eight bytes at a time from the input, zeros past its end.
struct Draw<'a>(&'a [u8]);

impl Draw<'_> {
    fn u64(&mut self) -> u64 {
        let mut word = [0u8; 8];
        let n = self.0.len().min(8);
        word[..n].copy_from_slice(&self.0[..n]);
        self.0 = &self.0[n..];
        u64::from_le_bytes(word)
    }
}

fuzz_target!(|data: &[u8]| {
    let mut draw = Draw(data);
    let head = draw.u64();
    let ndim = (head % 6) as i32;
    let (code, bits) = [(2u8, 32u8), (2, 64), (2, 16), (4, 16), (0, 64), (0, 32), (6, 8)][(head >> 8) as usize % 7];
    let small = head >> 16 & 1 == 1;
    let mut shape: Vec<i64> = (0..ndim).map(|_| if small { (draw.u64() % 5) as i64 } else { draw.u64() as i64 }).collect();
    let mut strides: Vec<i64> = (0..ndim).map(|_| if small { (draw.u64() % 9) as i64 - 4 } else { draw.u64() as i64 }).collect();
    let byte_offset = if small { draw.u64() % 64 } else { draw.u64() };
    let mut buffer: Vec<u8> = draw.0.to_vec();
    let capacity = buffer.len() as u64;
    if capacity == 0 {
        // A capacity of 0 tells the ABI to trust the descriptor.
        return;
    }
    let dtype = DLDataType { code, bits, lanes: 1 };
    let Some(nax) = nax_dtype(dtype) else { return };
    let t = DLTensor {
        data: buffer.as_mut_ptr().cast(),
        device: DLDevice { device_type: 1, device_id: 0 },
        ndim,
        dtype,
        shape: shape.as_mut_ptr(),
        strides: if head >> 17 & 1 == 1 { std::ptr::null_mut() } else { strides.as_mut_ptr() },
        byte_offset,
    };
    // SAFETY: the descriptor's pointers are valid and `capacity` is the
    // buffer's size: the ABI promises to read nothing outside it.
    match unsafe { tensor("fuzz", nax, &t, std::ptr::null(), capacity) } {
        Ok(Input::View(view)) => {
            // Every element gathered (an error only for memory).
            let _ = view.to_host().map(|t| t.to_f64_vec());
        }
        Ok(Input::Copied(copy)) => {
            let _ = copy.to_f64_vec();
        }
        _ => {}
    }
});

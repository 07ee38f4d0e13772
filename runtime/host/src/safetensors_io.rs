//! Host tensors in and out of safetensors files (CLI.md, "Tensors in and out
//! of `nax run`").
//!
//! Axis names travel in the file's metadata: the key `NAME.axes` holds the
//! names of tensor `NAME` separated by spaces, `_` for an unnamed axis, and
//! the empty string for rank 0. A tensor without that key is unnamed.
//!
//! Reading never panics and never reads out of bounds: the header is parsed
//! and validated by the `safetensors` crate (every tensor's offsets must
//! chain and cover the data exactly, and agree with its shape and dtype), and
//! each tensor's bytes are then taken with checked slicing. Writing goes to
//! a temporary file in the same directory, renamed over the target only once
//! complete, so an error leaves an existing file as it was.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensorError, SafeTensors, View};

use crate::error::HostError;
use crate::tensor::{HostTensor, TensorData, row_major_strides};
use crate::view::{TensorView, row_major_steps};
use nax_contract::DType;

/// The metadata key that holds the axis names of tensor `name`.
fn axes_key(name: &str) -> String {
    format!("{name}.axes")
}

/// Reads every tensor of the safetensors file at `path`, sorted by name,
/// with its axis names from the `NAME.axes` metadata.
///
/// Errors, each naming the file: it cannot be read; it is not a regular
/// file (a device or a pipe, which may never end); it is not a valid
/// safetensors file (truncated, a header length or offsets past the end,
/// invalid JSON, ...); a tensor has a dtype other than F16, BF16, F32, F64,
/// I32, I64 and BOOL (the error names the tensor and the dtype); a tensor's
/// `NAME.axes` holds a number of names other than its rank (the error names
/// the tensor). A `NAME.axes` key whose tensor is not in the file is ignored,
/// as is all other metadata.
pub fn read_tensors(path: &Path) -> Result<Vec<(String, HostTensor)>, HostError> {
    let read_error = |source| HostError::Read { path: path.into(), source };
    let (mut file, length) = open_regular(path)?;
    check_declared_length(&mut file, length, path)?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(length as usize).map_err(|_| HostError::Allocation { bytes: length as usize, count: length as usize })?;
    std::io::Read::read_to_end(&mut file, &mut bytes).map_err(read_error)?;
    parse(&bytes, path, |t| HostTensor::new(TensorData::from_le_bytes(t.dtype, t.raw), t.shape, t.names))
}

/// The file at `path`, opened, and its length; only a regular file: its
/// length is known and it ends (a device such as /dev/zero would be read
/// until memory runs out).
fn open_regular(path: &Path) -> Result<(fs::File, u64), HostError> {
    let read_error = |source| HostError::Read { path: path.into(), source };
    let file = fs::File::open(path).map_err(read_error)?;
    let metadata = file.metadata().map_err(read_error)?;
    if !metadata.is_file() {
        return Err(read_error(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file")));
    }
    Ok((file, metadata.len()))
}

/// A tensor's dtype (one nax has) and axis names (from the file's
/// `NAME.axes` metadata; unnamed without), from its header entry.
fn described(
    path: &Path,
    name: &str,
    info: &safetensors::tensor::TensorInfo,
    metadata: &safetensors::tensor::Metadata,
) -> Result<(DType, Vec<Option<String>>), HostError> {
    let dtype =
        to_dtype(info.dtype).ok_or_else(|| HostError::UnsupportedDType { path: path.into(), tensor: name.into(), dtype: format!("{:?}", info.dtype) })?;
    let names = match metadata.metadata().as_ref().and_then(|m| m.get(&axes_key(name))) {
        Some(axes) => parse_axes(path, name, axes, info.shape.len())?,
        None => vec![None; info.shape.len()],
    };
    Ok((dtype, names))
}

/// The most bytes a header may have (the `safetensors` crate's own cap).
const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Reads a file's header alone (its length capped) and refuses the file
/// when the data it declares is not the rest of the file, before any data
/// is read; the file is then read from its start. A header that does not
/// parse is left to [`parse`], whose message says what is wrong.
fn check_declared_length(file: &mut fs::File, length: u64, path: &Path) -> Result<(), HostError> {
    use std::io::Seek;
    if length < 8 {
        // Nothing to spare reading; `parse` says what is wrong.
        return Ok(());
    }
    let (header, text) = read_header(file, length, path)?;
    if let Ok(metadata) = serde_json::from_slice::<safetensors::tensor::Metadata>(&text) {
        check_length(header, &metadata, length, path)?;
    }
    file.rewind().map_err(|source| HostError::Read { path: path.into(), source })?;
    Ok(())
}

/// A file's header: its length and its text, read from the file's start
/// (the length checked against the file's and the cap first).
fn read_header(file: &mut fs::File, length: u64, path: &Path) -> Result<(u64, Vec<u8>), HostError> {
    use std::io::Read;
    let bad = |message: String| HostError::Format { path: path.into(), message };
    let read_error = |source| HostError::Read { path: path.into(), source };
    if length < 8 {
        return Err(bad(format!("the file has {length} bytes, fewer than the 8 that give the header length")));
    }
    let mut prefix = [0u8; 8];
    file.read_exact(&mut prefix).map_err(read_error)?;
    let header = u64::from_le_bytes(prefix);
    if header > MAX_HEADER_BYTES || header > length - 8 {
        return Err(bad(format!("the header length {header} is past the end of the file ({length} bytes) or above the {MAX_HEADER_BYTES}-byte cap")));
    }
    let mut text = vec![0u8; header as usize];
    file.read_exact(&mut text).map_err(read_error)?;
    Ok((header, text))
}

/// Refuses a file whose header declares other than its `length` bytes.
fn check_length(header: u64, metadata: &safetensors::tensor::Metadata, length: u64, path: &Path) -> Result<(), HostError> {
    let declared = 8 + header + metadata.data_len() as u64;
    if declared != length {
        return Err(HostError::Format { path: path.into(), message: format!("its header declares {declared} bytes in all, but the file has {length}") });
    }
    Ok(())
}

/// Which part of a tensor to read along one axis: the axis is `runs`
/// equal runs, each cut into `parts` equal blocks, and the part read is
/// block `index` of every run (the whole axis: one run of one part).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisBlock {
    /// How many runs the axis is made of.
    pub runs: usize,
    /// How many blocks each run is cut into.
    pub parts: usize,
    /// Which block of each run is read.
    pub index: usize,
}

impl AxisBlock {
    /// The whole axis.
    pub const WHOLE: AxisBlock = AxisBlock { runs: 1, parts: 1, index: 0 };

    /// The positions it reads along an axis of `size`, as (start, length)
    /// intervals in order; `None` where the blocks do not cut the axis
    /// evenly or `index` is not one of the parts.
    fn intervals(self, size: usize) -> Option<Vec<(usize, usize)>> {
        let pieces = self.runs.checked_mul(self.parts).filter(|&p| p > 0 && size.is_multiple_of(p) && self.index < self.parts)?;
        let (run, block) = (size / self.runs, size / pieces);
        Some((0..self.runs).map(|r| (r * run + self.index * block, block)).collect())
    }
}

/// A safetensors file opened for reading its tensors one at a time, each
/// whole or a block of it ([`AxisBlock`]), by positioned reads of the
/// bytes asked for alone: a process that needs a block of each weight
/// holds, and reads, only its blocks. The header is read and checked when
/// opening (as [`read_tensors`] checks it); a tensor's dtype and axis
/// names when it is read. The file may also be bytes the program holds
/// for its whole run (an AOT library's embedded weights,
/// [`TensorFile::in_memory`]): a block is then copied out of them alone.
#[derive(Debug)]
pub struct TensorFile {
    bytes: FileBytes,
    path: std::path::PathBuf,
    /// Where the tensors' data starts in the file.
    data_start: u64,
    metadata: safetensors::tensor::Metadata,
}

/// Where a [`TensorFile`]'s bytes are.
#[derive(Debug)]
enum FileBytes {
    /// A file, read by positioned reads.
    File(fs::File),
    /// Bytes in memory for the whole run.
    Memory(&'static [u8]),
}

/// What a [`TensorFile`] says of one of its tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredInfo {
    /// Its dtype.
    pub dtype: DType,
    /// Its sizes, in the file's axis order.
    pub shape: Vec<usize>,
    /// Its axis names from the file's `NAME.axes` metadata (unnamed without).
    pub names: Vec<Option<String>>,
}

impl TensorFile {
    /// Opens the file at `path` and reads its header; the errors are
    /// [`read_tensors`]'s for the file and its header.
    pub fn open(path: &Path) -> Result<TensorFile, HostError> {
        let (mut file, length) = open_regular(path)?;
        let (header, text) = read_header(&mut file, length, path)?;
        let parsed: safetensors::tensor::Metadata = serde_json::from_slice(&text).map_err(|e| {
            let bytes = [header.to_le_bytes().as_slice(), &text].concat();
            let message = repeated_name(&bytes).unwrap_or_else(|| format!("its header does not parse: {e}"));
            HostError::Format { path: path.into(), message }
        })?;
        check_length(header, &parsed, length, path)?;
        Ok(TensorFile { bytes: FileBytes::File(file), path: path.into(), data_start: 8 + header, metadata: parsed })
    }

    /// The safetensors file whose bytes are `bytes` (`origin` names them
    /// in errors), its header checked as [`TensorFile::open`] checks a
    /// file's.
    pub fn in_memory(bytes: &'static [u8], origin: &Path) -> Result<TensorFile, HostError> {
        // The crate's parse checks that the offsets cover the bytes exactly.
        let (header, metadata) = header_of(bytes, origin)?;
        Ok(TensorFile { bytes: FileBytes::Memory(bytes), path: origin.into(), data_start: 8 + header as u64, metadata })
    }

    /// What the file says of tensor `name` (`None`: the file has none of that name).
    pub fn info(&self, name: &str) -> Result<Option<StoredInfo>, HostError> {
        let Some(info) = self.metadata.info(name) else { return Ok(None) };
        let (dtype, names) = described(&self.path, name, info, &self.metadata)?;
        Ok(Some(StoredInfo { dtype, shape: info.shape.clone(), names }))
    }

    /// Tensor `name`'s part `blocks` (one per axis, in the file's axis
    /// order; none: the whole tensor), read from the file alone, with the
    /// file's axis names; `None` where the file has no tensor of that name.
    /// A block that does not cut an axis evenly is an error naming the
    /// tensor, the axis and the sizes.
    pub fn read(&self, name: &str, blocks: &[AxisBlock]) -> Result<Option<HostTensor>, HostError> {
        let Some(StoredInfo { dtype, shape, names }) = self.info(name)? else { return Ok(None) };
        let bad = |message: String| HostError::Format { path: self.path.clone(), message: format!("tensor '{}': {message}", crate::error::shortened(name)) };
        let blocks: Vec<AxisBlock> = if blocks.is_empty() { vec![AxisBlock::WHOLE; shape.len()] } else { blocks.to_vec() };
        if blocks.len() != shape.len() {
            return Err(bad(format!("{} axes' blocks asked of a tensor of rank {}", blocks.len(), shape.len())));
        }
        let mut intervals = Vec::with_capacity(shape.len());
        for (axis, (b, &size)) in blocks.iter().zip(&shape).enumerate() {
            intervals.push(
                b.intervals(size)
                    .ok_or_else(|| bad(format!("axis {axis} of size {size} is not {} runs of {} equal blocks (block {} asked)", b.runs, b.parts, b.index)))?,
            );
        }
        let block_shape: Vec<usize> = intervals.iter().map(|i| i.iter().map(|&(_, n)| n).sum()).collect();
        let elem = dtype.size_bytes();
        // The trailing axes read whole make one contiguous span per position of the others.
        let whole_from = (0..=shape.len()).rev().take_while(|&a| a == shape.len() || (blocks[a] == AxisBlock::WHOLE)).last().unwrap_or(shape.len());
        let span: usize = shape[whole_from..].iter().product::<usize>() * elem;
        let total: usize = block_shape.iter().product::<usize>() * elem;
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(total).map_err(|_| HostError::Allocation { bytes: total, count: total / elem.max(1) })?;
        let (begin, _) = self.metadata.info(name).map(|i| i.data_offsets).unwrap_or_default();
        let strides = row_major_strides(&shape);
        if total > 0 {
            // Every position of the leading axes, odometer-wise; adjacent reads merged.
            let lead = &intervals[..whole_from];
            let mut at = vec![(0usize, 0usize); lead.len()];
            let mut pending: Option<(u64, usize)> = None;
            loop {
                let mut offset = 0usize;
                for (a, &(k, i)) in at.iter().enumerate() {
                    let (start, _) = lead[a][k];
                    offset += (start + i) * strides[a];
                }
                let offset = self.data_start + (begin + offset * elem) as u64;
                pending = match pending {
                    Some((o, n)) if o + n as u64 == offset => Some((o, n + span)),
                    Some((o, n)) => {
                        self.read_at(&mut bytes, o, n)?;
                        Some((offset, span))
                    }
                    None => Some((offset, span)),
                };
                // Next position: the last leading axis moves fastest.
                let mut a = lead.len();
                loop {
                    if a == 0 {
                        break;
                    }
                    a -= 1;
                    let (k, i) = &mut at[a];
                    *i += 1;
                    if *i == lead[a][*k].1 {
                        *i = 0;
                        *k += 1;
                        if *k == lead[a].len() {
                            *k = 0;
                            continue;
                        }
                    }
                    break;
                }
                if at.iter().all(|&(k, i)| k == 0 && i == 0) {
                    break;
                }
            }
            if let Some((o, n)) = pending {
                self.read_at(&mut bytes, o, n)?;
            }
        }
        HostTensor::new(TensorData::from_le_bytes(dtype, &bytes), block_shape, names).map(Some).map_err(|e| bad(e.to_string()))
    }

    /// Appends `n` bytes of the file from `offset` to `out`.
    fn read_at(&self, out: &mut Vec<u8>, offset: u64, n: usize) -> Result<(), HostError> {
        use std::os::unix::fs::FileExt;
        let read_error = |source| HostError::Read { path: self.path.clone(), source };
        match &self.bytes {
            FileBytes::File(file) => {
                let from = out.len();
                out.resize(from + n, 0);
                file.read_exact_at(&mut out[from..], offset).map_err(read_error)
            }
            FileBytes::Memory(bytes) => {
                let span = usize::try_from(offset).ok().and_then(|o| bytes.get(o..o.checked_add(n)?));
                out.extend_from_slice(span.ok_or_else(|| read_error(std::io::ErrorKind::UnexpectedEof.into()))?);
                Ok(())
            }
        }
    }
}

/// A tensor of a safetensors file held in memory that lives as long as
/// the program reading it (an AOT library's embedded weights): a view of
/// its bytes in place where they are aligned for its dtype, else a copy.
#[derive(Debug)]
pub enum StoredTensor<'a> {
    /// The file's own bytes, not copied.
    InPlace(TensorView<'a>),
    /// Decoded into memory of its own (misaligned data, or `bool`, whose
    /// bytes must be checked to be 0 or 1).
    Copied(HostTensor),
}

/// As [`read_tensors`], from a file's bytes already in memory (`origin`
/// names them in errors), each tensor viewed in place when it can be.
pub fn read_tensors_in_place<'a>(bytes: &'a [u8], origin: &Path) -> Result<Vec<(String, StoredTensor<'a>)>, HostError> {
    parse(bytes, origin, |t| match in_place(&t) {
        Some(view) => view.map(StoredTensor::InPlace),
        None => HostTensor::new(TensorData::from_le_bytes(t.dtype, t.raw), t.shape, t.names).map(StoredTensor::Copied),
    })
}

/// A view of a tensor's bytes in place, or `None` when they are not
/// aligned for its elements or are `bool`s (whose bytes must be checked:
/// the caller copies them).
fn in_place<'a>(t: &RawTensor<'a>) -> Option<Result<TensorView<'a>, HostError>> {
    let size = t.dtype.size_bytes();
    if t.dtype == DType::Bool || !(t.raw.as_ptr() as usize).is_multiple_of(size) || !t.raw.len().is_multiple_of(size) {
        return None;
    }
    // SAFETY: the bytes are aligned for the dtype (whose alignment is its
    // size), hold a whole number of elements, live for `'a` and are only
    // read; every bit pattern is a value (floats and integers). The file is
    // little-endian, as is every machine nax runs on.
    Some(unsafe { TensorView::from_raw_parts(t.dtype, t.raw.as_ptr(), t.raw.len() / size, 0, t.shape.clone(), row_major_steps(&t.shape), t.names.clone()) })
}

/// One tensor of a parsed file, its bytes not yet decoded.
struct RawTensor<'a> {
    dtype: DType,
    shape: Vec<usize>,
    names: Vec<Option<String>>,
    raw: &'a [u8],
}

/// The header's length and what it says, of a safetensors file's bytes
/// (`path` names them in errors).
fn header_of(bytes: &[u8], path: &Path) -> Result<(usize, safetensors::tensor::Metadata), HostError> {
    SafeTensors::read_metadata(bytes).map_err(|e| HostError::Format { path: path.into(), message: repeated_name(bytes).unwrap_or_else(|| describe(&e, bytes)) })
}

/// Parses a safetensors file's bytes and makes each tensor with `make`
/// (whose error is reported as the file's, naming the tensor); sorted by
/// name.
fn parse<'a, T>(bytes: &'a [u8], path: &Path, make: impl Fn(RawTensor<'a>) -> Result<T, HostError>) -> Result<Vec<(String, T)>, HostError> {
    let bad_file = |message: String| HostError::Format { path: path.into(), message };
    let (header_len, metadata) = header_of(bytes, path)?;
    let data = header_len.checked_add(8).and_then(|start| bytes.get(start..)).ok_or_else(|| bad_file("the header runs past the end of the file".into()))?;
    let mut out = Vec::new();
    for (name, info) in metadata.tensors() {
        let (dtype, names) = described(path, &name, info, &metadata)?;
        let (start, end) = info.data_offsets;
        let raw = data.get(start..end).ok_or_else(|| {
            bad_file(format!("the data offsets [{start}, {end}] of tensor '{}' lie past the end of the file", crate::error::shortened(&name)))
        })?;
        let shape = info.shape.clone();
        let tensor = make(RawTensor { dtype, shape, names, raw }).map_err(|e| bad_file(format!("tensor '{name}': {e}")))?;
        out.push((name, tensor));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The safetensors crate's error in words that say what is wrong with the
/// file, with the sizes involved where they help.
fn describe(e: &SafeTensorError, bytes: &[u8]) -> String {
    let claimed = bytes.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()).map(u64::from_le_bytes);
    match (e, claimed) {
        (SafeTensorError::HeaderTooSmall, _) => format!("the file has {} bytes, fewer than the 8 that give the header length", bytes.len()),
        (SafeTensorError::HeaderTooLarge | SafeTensorError::InvalidHeaderLength, Some(n)) => {
            format!("the header length {n} points past the end of the file ({} bytes)", bytes.len())
        }
        (SafeTensorError::MetadataIncompleteBuffer, _) => format!(
            "the tensors' data offsets do not cover the file's {} bytes exactly \
             (truncated, or bytes past the end)",
            bytes.len()
        ),
        (SafeTensorError::InvalidOffset(name), _) => {
            format!("the data offsets of tensor '{}' do not follow the previous tensor's", crate::error::shortened(name))
        }
        (SafeTensorError::TensorInvalidInfo, _) => "a tensor's data offsets disagree with its shape and dtype".into(),
        _ => e.to_string(),
    }
}

/// The first tensor name the header of `bytes` gives twice, in words (a
/// JSON object may repeat a key, and the safetensors crate then reports
/// only that the data offsets do not follow); `None` where none repeats
/// or the header does not parse.
fn repeated_name(bytes: &[u8]) -> Option<String> {
    /// The keys of a JSON object, in order, repeats kept.
    struct Keys;
    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Vec<String>, M::Error> {
            let mut keys = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<serde::de::IgnoredAny>()?;
                keys.push(key);
            }
            Ok(keys)
        }
    }
    let len = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    let header = bytes.get(8..8usize.checked_add(len)?)?;
    let keys = serde::Deserializer::deserialize_map(&mut serde_json::Deserializer::from_slice(header), Keys).ok()?;
    let mut seen = std::collections::HashSet::new();
    let repeated = keys.into_iter().find(|k| !seen.insert(k.clone()))?;
    Some(format!("the header names tensor '{repeated}' twice (each tensor of a file has a name of its own)"))
}

/// The nax dtype of a safetensors dtype, or `None` when nax has none.
fn to_dtype(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::BOOL => DType::Bool,
        _ => return None,
    })
}

/// The safetensors dtype of a nax dtype.
fn from_dtype(d: DType) -> Dtype {
    match d {
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::Bool => Dtype::BOOL,
    }
}

/// A tensor's data as the little-endian bytes safetensors stores: its own
/// memory, not a copy (every dtype's elements are plain data, and a bool
/// is one byte, 0 or 1).
fn le_bytes(data: &TensorData) -> &[u8] {
    fn raw<T: Copy>(v: &[T]) -> &[u8] {
        // SAFETY: `T` is a plain numeric type (or bool) without padding;
        // the bytes cover exactly the slice's elements and live as long.
        unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
    }
    match data {
        TensorData::F16(v) => raw(v),
        TensorData::BF16(v) => raw(v),
        TensorData::F32(v) => raw(v),
        TensorData::F64(v) => raw(v),
        TensorData::I32(v) => raw(v),
        TensorData::I64(v) => raw(v),
        TensorData::Bool(v) => raw(v),
    }
}

#[cfg(target_endian = "big")]
compile_error!("safetensors files are little-endian; writing them from a big-endian machine's memory is not supported");

/// Parses a `NAME.axes` value: `rank` names separated by white space, `_`
/// for an unnamed axis (the empty string for rank 0).
fn parse_axes(path: &Path, tensor: &str, axes: &str, rank: usize) -> Result<Vec<Option<String>>, HostError> {
    let bad = |problem: String| HostError::BadAxesMetadata { path: path.into(), tensor: tensor.to_string(), axes: axes.to_string(), problem };
    let names: Vec<Option<String>> = axes.split_whitespace().map(|n| (n != "_").then(|| n.to_string())).collect();
    if names.len() != rank {
        return Err(bad(format!("names {} axes, but the tensor has rank {rank}", names.len())));
    }
    Ok(names)
}

/// The `NAME.axes` value of `names`.
fn format_axes(names: &[Option<String>]) -> String {
    let parts: Vec<&str> = names.iter().map(|n| n.as_deref().unwrap_or("_")).collect();
    parts.join(" ")
}

/// A tensor as the safetensors serializer wants it: its bytes borrowed.
struct Encoded<'a> {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: &'a [u8],
}

impl View for &Encoded<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }

    fn shape(&self) -> &[usize] {
        &self.shape
    }

    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(self.bytes)
    }

    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

/// Writes `t` to a safetensors file at `path` as the one tensor `name`, with
/// its axis names in the metadata key `NAME.axes` (`_` for an unnamed axis,
/// the empty string for rank 0).
///
/// The file is written to a temporary file in the same directory and
/// renamed over `path` only once complete: on any error, a file already at
/// `path` is left as it was and no temporary file remains. Errors name the
/// path: an unwritable or missing directory, a path that names no file, a
/// tensor name that is empty or `__metadata__`.
pub fn write_tensor_atomic(path: &Path, name: &str, t: &HostTensor) -> Result<(), HostError> {
    write_tensors_atomic(path, &[(name, t)])
}

/// Writes several tensors, each with its `NAME.axes` metadata, to one
/// safetensors file (a checkpoint), atomically as [`write_tensor_atomic`]
/// does. Errors: an empty, reserved or repeated name, or an I/O error.
pub fn write_tensors_atomic(path: &Path, tensors: &[(&str, &HostTensor)]) -> Result<(), HostError> {
    let mut encoded = Vec::with_capacity(tensors.len());
    let mut metadata = HashMap::new();
    for &(name, t) in tensors {
        let invalid = |reason| HostError::InvalidTensorName { path: path.into(), name: name.to_string(), reason };
        if name.is_empty() {
            return Err(invalid("a tensor name cannot be empty"));
        }
        if name == "__metadata__" {
            return Err(invalid("the name is reserved for the file's metadata"));
        }
        if metadata.insert(axes_key(name), format_axes(t.names())).is_some() {
            return Err(invalid("two tensors have this name"));
        }
        encoded.push((name, Encoded { dtype: from_dtype(t.dtype()), shape: t.shape().to_vec(), bytes: le_bytes(t.data()) }));
    }
    // Streamed to a temporary file beside `path` and renamed over it once
    // complete (by the safetensors crate), from the tensors' own memory:
    // writing a result costs no copy of it.
    if path.file_name().is_none() {
        return Err(HostError::Write { path: path.into(), source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path does not name a file") });
    }
    // No metadata without tensors: the safetensors crate writes an empty
    // map of tensors followed by metadata as JSON no reader accepts.
    let metadata = (!metadata.is_empty()).then_some(metadata);
    safetensors::serialize_to_file(encoded.iter().map(|(n, e)| (*n, e)), metadata, path).map_err(|e| match e {
        SafeTensorError::IoError(source) => HostError::Write { path: path.into(), source },
        other => HostError::Serialize { path: path.into(), message: other.to_string() },
    })?;
    // The temporary file was made private (0600); the result gets the
    // permissions a new file gets (0666 less the process's umask).
    let mode = 0o666 & !umask();
    let finish = || {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
        fs::File::open(path)?.sync_all()
    };
    finish().map_err(|source| HostError::Write { path: path.into(), source })
}

/// The process's file-creation mask (from `/proc/self/status`; 022 where
/// it cannot be read, as setting it to read it would race other threads).
fn umask() -> u32 {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Umask:")).and_then(|m| u32::from_str_radix(m.trim(), 8).ok()).unwrap_or(0o022)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_no_tensors_reads_back_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.safetensors");
        write_tensors_atomic(&path, &[]).unwrap();
        assert!(read_tensors(&path).unwrap().is_empty());
    }

    #[test]
    fn tensors_are_read_in_place_where_aligned_and_copied_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.safetensors");
        let a = HostTensor::from_f64(DType::F32, vec![2, 2], vec![Some("n".into()), None], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        let m = HostTensor::from_f64(DType::Bool, vec![3], vec![None], &[1.0, 0.0, 1.0]).unwrap();
        write_tensors_atomic(&path, &[("a", &a), ("m", &m)]).unwrap();
        let file = std::fs::read(&path).unwrap();
        // The file in 8-byte-aligned memory, and one byte past that.
        let mut words = vec![0u64; file.len().div_ceil(8) + 1];
        let bytes: &mut [u8] = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), words.len() * 8) };
        bytes[..file.len()].copy_from_slice(&file);
        let read = read_tensors_in_place(&bytes[..file.len()], &path).unwrap();
        let StoredTensor::InPlace(view) = &read[0].1 else { panic!("{:?}", read[0]) };
        assert_eq!(view.as_ptr(), bytes[file.len() - 3 - 16..].as_ptr(), "a view of the file's own bytes");
        assert_eq!(view.to_host().unwrap(), a);
        let StoredTensor::Copied(mask) = &read[1].1 else { panic!("a bool tensor is checked and copied") };
        assert_eq!(mask, &m);
        bytes.copy_within(..file.len(), 1);
        let shifted = read_tensors_in_place(&bytes[1..=file.len()], &path).unwrap();
        let StoredTensor::Copied(copy) = &shifted[0].1 else { panic!("misaligned data is copied") };
        assert_eq!(copy, &a);
    }

    #[test]
    fn a_block_read_from_the_file_holds_the_positions_of_its_runs_and_parts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.safetensors");
        let shape = [2usize, 12, 6];
        let values: Vec<f64> = (0..144).map(f64::from).collect();
        let names = vec![Some("a".to_string()), Some("b".to_string()), None];
        let w = HostTensor::from_f64(DType::F32, shape.to_vec(), names.clone(), &values).unwrap();
        let m = HostTensor::from_f64(DType::Bool, vec![4], vec![None], &[1.0, 0.0, 0.0, 1.0]).unwrap();
        write_tensors_atomic(&path, &[("w", &w), ("m", &m)]).unwrap();
        let file = TensorFile::open(&path).unwrap();
        assert_eq!(file.read("w", &[]).unwrap().unwrap(), w);
        // Axis 1: 3 runs of 2 blocks, block 1; axis 2: block 2 of 3.
        let blocks = [AxisBlock::WHOLE, AxisBlock { runs: 3, parts: 2, index: 1 }, AxisBlock { runs: 1, parts: 3, index: 2 }];
        let got = file.read("w", &blocks).unwrap().unwrap();
        assert_eq!(got.shape(), &[2, 6, 2]);
        assert_eq!(got.names(), names.as_slice());
        let rows = [2, 3, 6, 7, 10, 11];
        let want: Vec<f64> = (0..2).flat_map(|i| rows.iter().flat_map(move |&j| (4..6).map(move |k| (i * 72 + j * 6 + k) as f64))).collect();
        assert_eq!(got.to_f64_vec(), want);
        let half = file.read("m", &[AxisBlock { runs: 1, parts: 2, index: 1 }]).unwrap().unwrap();
        assert_eq!(half.to_f64_vec(), [0.0, 1.0]);
        assert!(file.read("nothing", &[]).unwrap().is_none());
        let uneven = file.read("w", &[AxisBlock::WHOLE, AxisBlock { runs: 1, parts: 5, index: 0 }, AxisBlock::WHOLE]).unwrap_err().to_string();
        assert!(uneven.contains("tensor 'w'") && uneven.contains("axis 1 of size 12"), "{uneven}");
        // The same bytes in memory (an AOT library's embedded weights) give the same blocks.
        let bytes = std::fs::read(&path).unwrap();
        let memory = TensorFile::in_memory(Vec::leak(bytes.clone()), Path::new("embedded")).unwrap();
        assert_eq!(memory.read("w", &blocks).unwrap().unwrap(), got);
        assert_eq!(memory.read("m", &[AxisBlock { runs: 1, parts: 2, index: 1 }]).unwrap().unwrap(), half);
        let short = TensorFile::in_memory(Vec::leak(bytes[..bytes.len() - 1].to_vec()), Path::new("embedded")).unwrap_err().to_string();
        assert!(short.contains("'embedded' is not a valid safetensors file") && short.contains("do not cover"), "{short}");
        // A truncated file is refused when opened, from its header.
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let short = TensorFile::open(&path).unwrap_err().to_string();
        assert!(short.contains("declares"), "{short}");
    }

    #[test]
    fn a_file_longer_or_shorter_than_its_header_declares_is_refused_from_the_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.safetensors");
        let a = HostTensor::from_f64(DType::F32, vec![4], vec![None], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        write_tensors_atomic(&path, &[("a", &a)]).unwrap();
        let good = std::fs::read(&path).unwrap();
        let mut longer = good.clone();
        longer.extend_from_slice(&[0; 1000]);
        std::fs::write(&path, &longer).unwrap();
        let e = read_tensors(&path).unwrap_err().to_string();
        assert!(e.contains(&format!("declares {} bytes in all, but the file has {}", good.len(), longer.len())), "{e}");
        let mut huge_header = good.clone();
        huge_header[..8].copy_from_slice(&(200_000_000u64).to_le_bytes());
        std::fs::write(&path, &huge_header).unwrap();
        assert!(read_tensors(&path).unwrap_err().to_string().contains("header length 200000000"));
    }

    #[test]
    fn several_tensors_share_one_file() {
        let dir = std::env::temp_dir().join(format!("nax-st-many-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ckpt.safetensors");
        let a = HostTensor::from_f64(DType::F32, vec![2], vec![Some("n".into())], &[1.0, 2.0]).unwrap();
        let b = HostTensor::from_f64(DType::I64, vec![1, 2], vec![None, Some("k".into())], &[3.0, 4.0]).unwrap();
        write_tensors_atomic(&path, &[("a", &a), ("b", &b)]).unwrap();
        let mut back = read_tensors(&path).unwrap();
        back.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(back, vec![("a".to_string(), a.clone()), ("b".to_string(), b)]);
        let e = write_tensors_atomic(&path, &[("a", &a), ("a", &a)]).unwrap_err();
        assert!(e.to_string().contains("two tensors have this name"), "{e}");
    }
    use crate::test_support::names;
    use tempfile::TempDir;

    /// The names of a directory's entries, sorted.
    fn entries(dir: &TempDir) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    /// A safetensors file's bytes: the header JSON and the data, as given.
    fn raw_file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut b = (header.len() as u64).to_le_bytes().to_vec();
        b.extend_from_slice(header.as_bytes());
        b.extend_from_slice(data);
        b
    }

    fn sample(dtype: DType) -> HostTensor {
        let v: Vec<f64> = (0..6).map(|i| f64::from(i) - 2.0).collect();
        HostTensor::from_f64(dtype, vec![2, 3], names("b _"), &v).unwrap()
    }

    #[test]
    fn round_trip_every_dtype() {
        let dir = tempfile::tempdir().unwrap();
        for dtype in DType::ALL {
            let p = dir.path().join("t.safetensors");
            let t = sample(dtype);
            write_tensor_atomic(&p, "out", &t).unwrap();
            let got = read_tensors(&p).unwrap();
            assert_eq!(got, vec![("out".to_string(), t)], "{dtype:?}");
        }
        assert_eq!(entries(&dir), vec!["t.safetensors"]);
    }

    #[test]
    fn writes_axes_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.safetensors");
        write_tensor_atomic(&p, "out", &sample(DType::F32)).unwrap();
        let bytes = fs::read(&p).unwrap();
        let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
        assert_eq!(meta.metadata().as_ref().unwrap().get("out.axes").unwrap(), "b _");

        let s = HostTensor::scalar_f64(DType::F32, 2.5);
        write_tensor_atomic(&p, "out", &s).unwrap();
        let bytes = fs::read(&p).unwrap();
        let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
        assert_eq!(meta.metadata().as_ref().unwrap().get("out.axes").unwrap(), "");
        assert_eq!(read_tensors(&p).unwrap(), vec![("out".to_string(), s)]);
    }

    #[test]
    fn reads_several_sorted_with_names() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("in.safetensors");
        let header = r#"{"__metadata__":{"x.axes":"d n","g.axes":"d","other":"1"},
            "x":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]},
            "g":{"dtype":"I64","shape":[2],"data_offsets":[8,24]},
            "a":{"dtype":"BOOL","shape":[],"data_offsets":[24,25]}}"#;
        let mut data = Vec::new();
        data.extend_from_slice(&1.5f32.to_le_bytes());
        data.extend_from_slice(&(-2f32).to_le_bytes());
        data.extend_from_slice(&7i64.to_le_bytes());
        data.extend_from_slice(&(-8i64).to_le_bytes());
        data.push(3); // any non-zero byte reads as true
        fs::write(&p, raw_file(header, &data)).unwrap();
        let got = read_tensors(&p).unwrap();
        let got_names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(got_names, ["a", "g", "x"]);
        assert_eq!(got[0].1.data(), &TensorData::Bool(vec![true]));
        assert_eq!(got[0].1.rank(), 0);
        assert_eq!(got[1].1.data(), &TensorData::I64(vec![7, -8]));
        assert_eq!(got[1].1.names(), names("d").as_slice());
        assert_eq!(got[2].1.data(), &TensorData::F32(vec![1.5, -2.0]));
        assert_eq!(got[2].1.names(), names("d n").as_slice());
        assert_eq!(got[2].1.shape(), &[2, 1]);
    }

    #[test]
    fn unaligned_data_reads() {
        // A header length that is not a multiple of 8 puts the data at an odd offset.
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("u.safetensors");
        let header = r#"{"x":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}"#;
        assert_ne!(header.len() % 8, 0);
        fs::write(&p, raw_file(header, &0.25f64.to_le_bytes())).unwrap();
        assert_eq!(read_tensors(&p).unwrap()[0].1.data(), &TensorData::F64(vec![0.25]));
    }

    fn read_err(tag: &str, bytes: &[u8]) -> (std::path::PathBuf, HostError, TempDir) {
        let dir = tempfile::Builder::new().prefix(tag).tempdir().unwrap();
        let p = dir.path().join("bad.safetensors");
        fs::write(&p, bytes).unwrap();
        let e = read_tensors(&p).unwrap_err();
        assert!(e.to_string().contains(&*p.to_string_lossy()), "{e}");
        (p, e, dir)
    }

    #[test]
    fn missing_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nope.safetensors");
        let e = read_tensors(&p).unwrap_err();
        assert!(matches!(e, HostError::Read { .. }), "{e}");
        assert!(e.to_string().contains("nope.safetensors"), "{e}");
        // A directory is not a file either.
        assert!(matches!(read_tensors(dir.path()).unwrap_err(), HostError::Read { .. }));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.safetensors");
        write_tensor_atomic(&p, "out", &sample(DType::F32)).unwrap();
        let good = fs::read(&p).unwrap();
        for len in 0..good.len() {
            let (_, e, _d) = read_err("trunc1", &good[..len]);
            assert!(matches!(e, HostError::Format { .. }), "{len}: {e}");
        }
        let mut longer = good.clone();
        longer.push(0);
        let (_, e, _d) = read_err("trunc2", &longer);
        assert!(matches!(e, HostError::Format { .. }), "{e}");
    }

    #[test]
    fn huge_header_length_is_an_error() {
        for n in [u64::MAX, 1 << 40, 200_000_000, 1000] {
            let mut b = n.to_le_bytes().to_vec();
            b.extend_from_slice(b"{}");
            let (_, e, _d) = read_err("huge", &b);
            assert!(e.to_string().contains("header length"), "{e}");
        }
        let (_, e, _d) = read_err("short", &[1, 2, 3]);
        assert!(e.to_string().contains("fewer than the 8"), "{e}");
    }

    #[test]
    fn offsets_past_the_end_are_errors() {
        let cases = [
            r#"{"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}"#,
            r#"{"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
            r#"{"x":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}}"#,
            r#"{"x":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,18446744073709551615]}}"#,
            r#"{"x":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}}"#,
            r#"{"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}"#,
            r#"{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#,
            r#"{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"y":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
        ];
        for h in cases {
            let (_, e, _d) = read_err("offsets", &raw_file(h, &[0; 4]));
            assert!(matches!(e, HostError::Format { .. }), "{h}: {e}");
        }
    }

    #[test]
    fn corrupt_json_is_an_error() {
        for h in [
            "{",
            "not json",
            "\u{0}\u{0}",
            r#"{"x":{"dtype":"F32","shape":[1]}}"#,
            r#"{"x":{"dtype":"NOPE","shape":[1],"data_offsets":[0,4]}}"#,
            r#"{"x":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}"#,
            r#"{"__metadata__":{"x.axes":3},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#,
            &"[".repeat(10_000),
        ] {
            let (_, e, _d) = read_err("json", &raw_file(h, &[0; 4]));
            assert!(matches!(e, HostError::Format { .. }), "{h}: {e}");
        }
        // Invalid UTF-8 in the header.
        let mut b = 2u64.to_le_bytes().to_vec();
        b.extend_from_slice(&[0xff, 0xfe]);
        let (_, e, _d) = read_err("utf8", &b);
        assert!(matches!(e, HostError::Format { .. }), "{e}");
    }

    #[test]
    fn unsupported_dtype_names_tensor_and_dtype() {
        let h = r#"{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}"#;
        let (_, e, _d) = read_err("dtype", &raw_file(h, &[1, 2]));
        assert!(
            matches!(&e, HostError::UnsupportedDType { tensor, dtype, .. }
            if tensor == "w" && dtype == "U8"),
            "{e}"
        );
    }

    #[test]
    fn axes_count_must_match_rank() {
        for (axes, rank_shape) in [("a b c", "[2,1]"), ("a", "[2,1]"), ("a", "[]"), ("", "[1]")] {
            let h = format!(
                r#"{{"__metadata__":{{"x.axes":"{axes}"}},"x":{{"dtype":"F32","shape":{rank_shape},"data_offsets":[0,{}]}}}}"#,
                if rank_shape == "[2,1]" { 8 } else { 4 }
            );
            let data = vec![0u8; if rank_shape == "[2,1]" { 8 } else { 4 }];
            let (_, e, _d) = read_err("axes", &raw_file(&h, &data));
            assert!(matches!(&e, HostError::BadAxesMetadata { tensor, .. } if tensor == "x"), "{e}");
            assert!(e.to_string().contains("'x.axes'"), "{e}");
        }
    }

    /// Messages that say what is wrong: a tensor named twice, a NUL inside
    /// an axis name, a huge `.axes` value shown by its start and length.
    #[test]
    fn unclear_files_get_clear_messages() {
        let h = r#"{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#;
        let (_, e, _d) = read_err("twice", &raw_file(h, &[0; 8]));
        assert!(e.to_string().contains("names tensor 'x' twice"), "{e}");
        let h = r#"{"__metadata__":{"x.axes":"D\u0000"},"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#;
        let (_, e, _d) = read_err("nul", &raw_file(h, &[0; 4]));
        assert!(e.to_string().contains("control characters"), "{e}");
        let long = "a ".repeat(100_000);
        let h = format!(r#"{{"__metadata__":{{"x.axes":"{long}"}},"x":{{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}}}"#);
        let (_, e, _d) = read_err("long", &raw_file(&h, &[0; 4]));
        let message = e.to_string();
        assert!(message.len() < 1000 && message.contains("200000 bytes"), "{}", &message[..message.len().min(2000)]);
    }

    #[test]
    fn write_rejects_bad_tensor_names() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.safetensors");
        for name in ["", "__metadata__"] {
            let e = write_tensor_atomic(&p, name, &sample(DType::F32)).unwrap_err();
            assert!(matches!(e, HostError::InvalidTensorName { .. }), "{e}");
        }
        assert!(entries(&dir).is_empty());
    }

    /// A written file has the permissions of any new file (not the
    /// temporary file's private 0600), and its bytes are the tensor's.
    #[test]
    fn a_written_file_gets_the_permissions_a_new_file_gets() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let t = HostTensor::from_f64(DType::F32, vec![3], names("n"), &[1.0, -2.0, 0.5]).unwrap();
        write_tensor_atomic(&dir.path().join("t.safetensors"), "t", &t).unwrap();
        fs::File::create(dir.path().join("plain")).unwrap();
        let mode = |name: &str| fs::metadata(dir.path().join(name)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("t.safetensors"), mode("plain"));
        assert_eq!(read_tensors(&dir.path().join("t.safetensors")).unwrap(), vec![("t".to_string(), t)]);
    }

    #[test]
    fn failed_write_leaves_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("o.safetensors");
        write_tensor_atomic(&p, "out", &sample(DType::F32)).unwrap();
        let before = fs::read(&p).unwrap();
        // Renaming a file over a non-empty directory fails: the directory
        // stays, and no temporary file is left behind.
        let d = dir.path().join("sub");
        fs::create_dir(&d).unwrap();
        fs::write(d.join("keep"), b"x").unwrap();
        let e = write_tensor_atomic(&d, "out", &sample(DType::I32)).unwrap_err();
        assert!(matches!(e, HostError::Write { .. }), "{e}");
        assert!(e.to_string().contains("sub"), "{e}");
        assert_eq!(entries(&dir), vec!["o.safetensors", "sub"]);
        assert_eq!(fs::read(&p).unwrap(), before);
    }

    #[test]
    fn unwritable_directory_is_an_error_naming_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("missing_dir").join("o.safetensors");
        let e = write_tensor_atomic(&p, "out", &sample(DType::F32)).unwrap_err();
        assert!(matches!(e, HostError::Write { .. }), "{e}");
        assert!(e.to_string().contains("missing_dir"), "{e}");
        let e = write_tensor_atomic(Path::new("/"), "out", &sample(DType::F32)).unwrap_err();
        assert!(matches!(e, HostError::Write { .. }), "{e}");
    }

    #[test]
    fn empty_tensor_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.safetensors");
        let t = HostTensor::new(TensorData::F32(vec![]), vec![0, 3], names("n _")).unwrap();
        write_tensor_atomic(&p, "out", &t).unwrap();
        assert_eq!(read_tensors(&p).unwrap(), vec![("out".to_string(), t)]);
    }
}

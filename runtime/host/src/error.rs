//! The errors of host data: reading and writing tensor files, building
//! host tensors and views of the caller's memory, and the memory for them.
//!
//! Every variant carries what its message needs (the file, the tensor, the
//! axis, the shape, the dtype), so a caller can print it as is or inspect
//! the fields. The runtime wraps it (`RuntimeError::Host`) for the calls it
//! checks and runs.

use nax_contract::DType;
use std::fmt::Write as _;
use std::path::PathBuf;

/// An error of host data. The `Display` text is a complete sentence
/// fragment meant for users, e.g. `'w.safetensors' is not a valid
/// safetensors file: truncated`.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A file could not be read (missing, unreadable, a directory, ...).
    #[error("cannot read '{}': {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },

    /// A file could not be written, or not moved into place.
    #[error("cannot write '{}': {source}", .path.display())]
    Write {
        /// The file that was to be written.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },

    /// A file is not a well-formed safetensors file (truncated, a header
    /// length or data offsets past the end, invalid JSON, ...).
    #[error("'{}' is not a valid safetensors file: {message}", .path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },

    /// A tensor in a file has an element type nax does not support.
    #[error(
        "'{}': tensor '{}' has dtype {}, which nax does not support \
         (supported: F16 BF16 F32 F64 I32 I64 BOOL)",
        .path.display(),
        shortened(.tensor),
        shortened(.dtype)
    )]
    UnsupportedDType {
        /// The file.
        path: PathBuf,
        /// The tensor's name in the file.
        tensor: String,
        /// The dtype as the file spells it (`U8`, `F8_E4M3`, ...).
        dtype: String,
    },

    /// The `NAME.axes` metadata of a tensor does not fit the tensor.
    #[error(
        "'{}': the metadata '{}.axes' = \"{}\" {problem}",
        .path.display(),
        shortened(.tensor),
        shortened(.axes)
    )]
    BadAxesMetadata {
        /// The file.
        path: PathBuf,
        /// The tensor's name in the file.
        tensor: String,
        /// The metadata value as written in the file.
        axes: String,
        /// What is wrong: a count that differs from the rank, a bad name.
        problem: String,
    },

    /// A tensor name that cannot be written to a safetensors file.
    #[error("cannot write '{}': invalid tensor name '{}' ({reason})", .path.display(), shortened(.name))]
    InvalidTensorName {
        /// The file that was to be written.
        path: PathBuf,
        /// The rejected name.
        name: String,
        /// Why it is rejected.
        reason: &'static str,
    },

    /// Serializing a tensor failed in the safetensors library.
    #[error("cannot write '{}': {message}", .path.display())]
    Serialize {
        /// The file that was to be written.
        path: PathBuf,
        /// The library's message.
        message: String,
    },

    /// The product of a shape does not fit in `usize`.
    #[error("the element count of shape {} overflows", fmt_shape(.shape))]
    ShapeOverflow {
        /// The shape.
        shape: Vec<usize>,
    },

    /// The number of elements given does not match the shape.
    #[error(
        "shape {} holds {expected} elements, but {actual} were given",
        fmt_shape(.shape)
    )]
    ElementCount {
        /// The shape.
        shape: Vec<usize>,
        /// The product of the shape.
        expected: usize,
        /// The number of elements given.
        actual: usize,
    },

    /// The number of axis names does not match the rank.
    #[error(
        "{} axis names {} given for a tensor of rank {rank}",
        .given.len(),
        shown_names(.given)
    )]
    NamesRank {
        /// The names given.
        given: Vec<Option<String>>,
        /// The tensor's rank.
        rank: usize,
    },

    /// An axis name that is empty, `_`, or contains white space (it could
    /// not travel in the space-separated `NAME.axes` metadata).
    #[error("invalid axis name '{}': {reason}", shortened(.name))]
    InvalidAxisName {
        /// The rejected name.
        name: String,
        /// Why it is rejected.
        reason: &'static str,
    },

    /// A permutation that is not one of `0..rank`.
    #[error("{perm:?} is not a permutation of the {rank} axes of a tensor")]
    InvalidPermutation {
        /// The rejected permutation.
        perm: Vec<usize>,
        /// The tensor's rank.
        rank: usize,
    },

    /// A view whose strides are not one per axis.
    #[error("a view of shape {} needs one stride per axis, not {strides:?}", fmt_shape(.shape))]
    StridesRank {
        /// The shape.
        shape: Vec<usize>,
        /// The strides given.
        strides: Vec<isize>,
    },

    /// A view that would reach outside the memory it borrows.
    #[error(
        "a view of shape {} with strides {strides:?} from element {offset} reaches outside \
         the {len} elements it borrows",
        fmt_shape(.shape)
    )]
    ViewOutOfBounds {
        /// The shape.
        shape: Vec<usize>,
        /// The strides, in elements.
        strides: Vec<isize>,
        /// The first element's position.
        offset: usize,
        /// The number of elements borrowed.
        len: usize,
    },

    /// A result buffer of the wrong dtype or length.
    #[error(
        "the result is {expected_len} elements of {}, but the buffer given holds {len} elements of {}",
        .expected_dtype.as_str(),
        .dtype.as_str()
    )]
    OutputBuffer {
        /// The result's dtype.
        expected_dtype: DType,
        /// The result's element count.
        expected_len: usize,
        /// The buffer's dtype.
        dtype: DType,
        /// The buffer's element count.
        len: usize,
    },

    /// Memory for a buffer could not be had.
    #[error("cannot allocate {bytes} bytes for a buffer of {count} elements")]
    Allocation {
        /// The bytes asked for.
        bytes: usize,
        /// The elements asked for.
        count: usize,
    },
}

/// `[2 3 4]`.
fn fmt_shape(shape: &[usize]) -> String {
    let mut s = String::from("[");
    for (i, d) in shape.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let _ = write!(s, "{d}");
    }
    s.push(']');
    s
}

/// `[b _ n]`: axis names as in a type, `_` for an unnamed axis (each name
/// [`shortened`]).
pub fn shown_names(names: &[Option<String>]) -> String {
    let mut s = String::new();
    for (i, n) in names.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(n.as_deref().unwrap_or("_"));
    }
    format!("[{}]", shortened(&s))
}

/// How many characters of a user's text a message quotes.
const QUOTED_CHARS: usize = 80;

/// User data (a name, a metadata value) as a message quotes it: whole when
/// short, else its first [`QUOTED_CHARS`] characters and its length, so
/// that a 200 KB axis name does not fill a terminal.
pub fn shortened(text: &str) -> String {
    match text.char_indices().nth(QUOTED_CHARS) {
        Some((end, _)) => format!("{}... ({} bytes)", &text[..end], text.len()),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::names;

    #[test]
    fn formats_names_and_shapes() {
        assert_eq!(shown_names(&names("b _ n")), "[b _ n]");
        assert_eq!(shown_names(&[]), "[]");
        assert_eq!(fmt_shape(&[2, 3]), "[2 3]");
        assert_eq!(fmt_shape(&[]), "[]");
        let long = "a".repeat(200_000);
        assert_eq!(shortened(&long), format!("{}... (200000 bytes)", "a".repeat(80)));
        assert_eq!(shown_names(&[Some(long.clone()), None]).len(), 2 + 80 + "... (200002 bytes)".len());
    }

    #[test]
    fn file_messages_name_the_file() {
        let e = HostError::Format { path: "/tmp/a.safetensors".into(), message: "truncated".into() };
        assert_eq!(e.to_string(), "'/tmp/a.safetensors' is not a valid safetensors file: truncated");
        let e = HostError::UnsupportedDType { path: "f".into(), tensor: "w".into(), dtype: "U8".into() };
        assert!(e.to_string().contains("tensor 'w' has dtype U8"));
    }
}

//! Where the command line writes: `nax run --out` and `nax build -o` name
//! a new path in an existing directory or a regular file (a symbolic link
//! to one is followed, so the link stays a link); a directory, a FIFO, a
//! device, a socket or a dangling link is refused before any work, naming
//! what it is. And what it prints: a closed pipe on stdout (`nax check
//! --types | head -1`) ends the printing quietly.

use std::io::Write;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// Why `out` cannot be written, found before any work.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The directory `out` would be created in does not exist.
    #[error("cannot write `{}`: the directory `{}` does not exist ({error}); create it first", .out.display(), .dir.display())]
    NoDirectory { out: PathBuf, dir: PathBuf, error: std::io::Error },
    /// What `out` would be created in is not a directory.
    #[error("cannot write `{}`: `{}` is not a directory", .out.display(), .dir.display())]
    NotADirectory { out: PathBuf, dir: PathBuf },
    /// `out` is a symbolic link to nothing.
    #[error("cannot write `{}`: it is a symbolic link to nothing that exists ({error})", .out.display())]
    DanglingLink { out: PathBuf, error: std::io::Error },
    /// `out` cannot be inspected.
    #[error("cannot write `{}`: {error}", .out.display())]
    Inspect { out: PathBuf, error: std::io::Error },
    /// `out` (or what its link leads to) is not a regular file.
    #[error("`{}` is {what}{}: the output is written to a regular file or a new path", .out.display(), through(.out, .resolved))]
    NotAFile { out: PathBuf, resolved: PathBuf, what: &'static str },
}

/// ` (through the link to `R`)` where a link led from `out` to `resolved`.
fn through(out: &Path, resolved: &Path) -> String {
    if resolved != out { format!(" (through the link to `{}`)", resolved.display()) } else { String::new() }
}

/// The file `out` names, to be replaced by the result: `out` itself, or
/// the regular file a symbolic link `out` leads to; why not, otherwise.
pub fn target(out: &Path) -> Result<PathBuf, OutputError> {
    let inspect = |error| OutputError::Inspect { out: out.to_path_buf(), error };
    let resolved = match std::fs::symlink_metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = directory(out);
            return match std::fs::metadata(dir) {
                Ok(meta) if meta.is_dir() => Ok(out.to_path_buf()),
                Ok(_) => Err(OutputError::NotADirectory { out: out.to_path_buf(), dir: dir.to_path_buf() }),
                Err(error) => Err(OutputError::NoDirectory { out: out.to_path_buf(), dir: dir.to_path_buf(), error }),
            };
        }
        Err(e) => return Err(inspect(e)),
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(out).map_err(|error| OutputError::DanglingLink { out: out.to_path_buf(), error })?,
        Ok(_) => out.to_path_buf(),
    };
    let meta = std::fs::metadata(&resolved).map_err(inspect)?;
    let kind = meta.file_type();
    let what = if kind.is_file() {
        return Ok(resolved);
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(OutputError::NotAFile { out: out.to_path_buf(), resolved, what })
}

/// Prints `text` to stdout; a reader that closed the pipe ends it quietly.
pub fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("error: cannot write to stdout: {e}");
    }
}

/// Writes `bytes` to `out` (a [`target`]) atomically: to a temporary file
/// beside it, renamed over it once complete; an error leaves `out` as it was.
pub fn write(out: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = tempfile::NamedTempFile::new_in(directory(out))?;
    tmp.write_all(bytes)?;
    tmp.persist(out).map(drop).map_err(|e| e.error)
}

/// The directory a path is in (`.` for a bare file name).
fn directory(path: &Path) -> &Path {
    path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

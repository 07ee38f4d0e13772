//! `nax`: the command line (CLI.md). Today: `check` and `explain`.
//!
//! Exit codes: 0 success, 1 when the program has an error, 2 for a usage or
//! I/O problem (clap's own usage errors exit 2 as well).

mod report;

use clap::{Parser, Subcommand, ValueEnum};
use nax_front::Code;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "nax", version, about = "An optimizing compiler for tensor programs with named axes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and check a file: exit 0 when it has no error, 1 when it has one.
    Check {
        /// The .nax source file.
        file: PathBuf,
        /// How to print diagnostics (and, with --types, the types).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Print every function's signature and each binding's type, sizes and range.
        #[arg(long)]
        types: bool,
    },
    /// Print the long explanation of an error code, with an example.
    Explain {
        /// A code such as E0404.
        code: String,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check { file, format, types } => check(&file, format, types),
        Command::Explain { code } => explain(&code),
    }
}

/// Reads a source file, or says why not (exit 2).
fn read_source(path: &Path) -> Result<String, ExitCode> {
    let bytes = std::fs::read(path).map_err(|e| {
        eprintln!("error: cannot read `{}`: {e}", path.display());
        ExitCode::from(2)
    })?;
    String::from_utf8(bytes).map_err(|e| {
        eprintln!("error: `{}` is not UTF-8 text (invalid byte at offset {})", path.display(), e.utf8_error().valid_up_to());
        ExitCode::from(2)
    })
}

fn check(path: &Path, format: Format, types: bool) -> ExitCode {
    let source = match read_source(path) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let checked = nax_front::check_source(&source);
    match format {
        Format::Json => println!("{}", report::json(&source, &checked)),
        Format::Text => {
            let name = path.display().to_string();
            eprint!("{}", nax_front::diagnostics::render_text(&name, &source, &checked.diagnostics));
            if types {
                print!("{}", report::types_text(&source, &checked));
            }
        }
    }
    if checked.has_errors() { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

fn explain(code: &str) -> ExitCode {
    match Code::parse(code) {
        Some(c) => {
            print!("{}", c.explanation());
            ExitCode::SUCCESS
        }
        None => {
            eprintln!("error: `{code}` is not a nax error code; codes look like E0404 or W0601");
            ExitCode::from(2)
        }
    }
}

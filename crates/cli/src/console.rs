//! Writing to the terminal without panicking: the one writer of the `cockpit` command for
//! standard output and standard error.
//!
//! A reader that went away (`cockpit diagnose … | head -1`, `2>&1 | true`, a closed terminal)
//! is no error of the command's: what it writes then is dropped quietly and the exit status
//! stays the one the command decided. `println!` and `eprintln!` would panic there (exit 101).

use std::io::Write;

/// Writes `args` to standard output, ignoring a closed or failing stream.
pub fn out(args: std::fmt::Arguments<'_>) {
    let mut stream = std::io::stdout().lock();
    let _ = stream.write_fmt(args).and_then(|()| stream.flush());
}

/// Writes `args` to standard error, ignoring a closed or failing stream.
pub fn err(args: std::fmt::Arguments<'_>) {
    let mut stream = std::io::stderr().lock();
    let _ = stream.write_fmt(args).and_then(|()| stream.flush());
}

//! Logging setup: tracing to stderr at the command's default level; `RUST_LOG` changes it.
//! Colours only when stderr is a terminal (and `NO_COLOR` is unset): a log written to a file or
//! a journal gets plain text, which is also cheaper to format.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

pub fn init(default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    // A second init (tests) is harmless; the first subscriber stays.
    let ansi = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

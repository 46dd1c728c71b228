//! Config errors: each names the file or key, the value and what is allowed.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file `{}`: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Syntax, unknown keys, wrong types (the message names the key's
    /// path and quotes the line).
    #[error("invalid config `{origin}`: {message}")]
    Parse { origin: String, message: String },
    #[error("`{key}` = {value} is out of range: {allowed}")]
    OutOfRange {
        key: &'static str,
        value: String,
        allowed: String,
    },
    #[error("`{key}` = {value} is not supported: {allowed}")]
    Unsupported {
        key: &'static str,
        value: String,
        allowed: String,
    },
    #[error("{0}")]
    Conflict(String),
    /// The environment could not be built (a Python env's exception, or
    /// Python options given to a built-in).
    #[error("`env`: {0}")]
    Env(String),
}

//! Sweep and population specs read from TOML files: `base` may name a
//! run config file (relative to the spec's folder) instead of holding the
//! config as a `[base]` table.

use serde::de::DeserializeOwned;
use std::path::Path;

/// Reads a spec; a type or key error names the file and the key path.
pub fn load<T: DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let json = serde_json::to_vec(&actor_client::control::spec_json(path)?)?;
    rlfleet_shared::config::from_json_keyed(&json)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

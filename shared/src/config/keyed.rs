//! Deserialising configs (TOML files, JSON bodies) with the full path of
//! the offending key in the error: `stop.max_episodes: invalid value:
//! integer `-5`, expected u64` rather than the bare serde message; an
//! unknown key also gets the nearest allowed one (`suggest.rs`).

use serde::de::DeserializeOwned;

/// `key.path: message`, or the message alone for the document itself.
fn keyed<E: std::fmt::Display>(e: serde_path_to_error::Error<E>) -> String {
    let path = e.path().to_string();
    let inner = super::suggest::with_suggestion(e.into_inner().to_string().trim_end().to_string());
    if path.is_empty() || path == "." {
        inner
    } else {
        format!("{path}: {inner}")
    }
}

/// Parses TOML into `T`; a type error names the key's full path.
pub fn from_toml_keyed<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let de = toml::Deserializer::parse(text).map_err(|e| e.to_string().trim_end().to_string())?;
    serde_path_to_error::deserialize(de).map_err(keyed)
}

/// Parses JSON into `T`; a type error names the key's full path.
pub fn from_json_keyed<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(keyed)?;
    de.end().map_err(|e| e.to_string())?;
    Ok(value)
}

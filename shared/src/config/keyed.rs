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

/// Parses TOML into `T`; a type error names the key's full path, and a
/// missing key the table it belongs in (TOML's own caret would point at
/// the table's first line, a comment as likely as not).
pub fn from_toml_keyed<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let de = toml::Deserializer::parse(text).map_err(|e| e.to_string().trim_end().to_string())?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let Some(key) = e.inner().message().strip_prefix("missing field ") else {
            return keyed(e);
        };
        let path = e.path().to_string();
        let place = if path.is_empty() || path == "." {
            "at the top of the file (before any [table])".to_string()
        } else {
            format!("in table `[{path}]`")
        };
        format!("missing key {key}: it is required {place}")
    })
}

/// Parses JSON into `T`; a type error names the key's full path.
pub fn from_json_keyed<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(keyed)?;
    de.end().map_err(|e| e.to_string())?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::from_toml_keyed;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Outer {
        name: String,
        inner: Inner,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        width: u32,
    }

    #[test]
    fn a_missing_key_names_its_table_not_a_line() {
        let top = from_toml_keyed::<Outer>("# a comment\n[inner]\nwidth = 1\n").unwrap_err();
        assert_eq!(
            top,
            "missing key `name`: it is required at the top of the file (before any [table])"
        );
        let nested = from_toml_keyed::<Outer>("name = \"x\"\n[inner]\n# nothing\n").unwrap_err();
        assert_eq!(
            nested,
            "missing key `width`: it is required in table `[inner]`"
        );
    }

    #[test]
    fn a_run_config_without_env_says_so() {
        let e = crate::config::RunConfig::from_toml(
            "# a comment\nname = \"x\"\nagent = \"dqn\"\nworkflow = \"single\"\noutput_dir = \"o\"\n",
            "run.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("missing key `env`") && !e.contains("# a comment"),
            "{e}"
        );
    }
}

//! Config key paths (`dqn.lr`, `stop.max_env_steps`): reading a run
//! config's value at one and making a config with values replaced, each
//! result parsed and validated as a file would be. Sweeps and populations
//! build their runs this way.

use super::{ConfigError, RunConfig, from_json_keyed};
use serde_json::Value;

/// `KEY=VALUE` (`--set`): the key path and the value read as TOML
/// (`0.001`, `true`, `[64, 64]`, `"text"`), or as a string when it is not
/// TOML (`CartPole-v1`).
pub fn parse_assignment(text: &str) -> Result<(String, Value), String> {
    let (key, value) = text
        .split_once('=')
        .ok_or("expected KEY=VALUE, e.g. dqn.lr=0.001")?;
    let key = key.trim();
    if key.is_empty() {
        return Err("the key before `=` is empty".into());
    }
    let value = value.trim();
    let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .map(|v| serde_json::to_value(v).expect("TOML values are JSON"))
        .unwrap_or_else(|| Value::String(value.to_string()));
    Ok((key.to_string(), parsed))
}

impl RunConfig {
    /// The value at dotted key `path` (after defaults), if there is one.
    pub fn value_at(&self, path: &str) -> Option<Value> {
        let mut v = serde_json::to_value(self).expect("a run config always serialises");
        for key in path.split('.') {
            v = v.as_object_mut()?.remove(key)?;
        }
        Some(v)
    }

    /// This config with the value at each dotted key path replaced (a
    /// number given for an integer key is rounded to one), parsed and
    /// validated again. The error names the key path and value.
    pub fn with_values(&self, values: &[(String, Value)]) -> Result<RunConfig, ConfigError> {
        let mut doc = serde_json::to_value(self).expect("a run config always serialises");
        let origin = values
            .iter()
            .map(|(k, v)| format!("{k} = {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let bad = |message: String| ConfigError::Parse {
            origin: format!("the values `{origin}`"),
            message,
        };
        for (path, value) in values {
            let mut keys: Vec<&str> = path.split('.').collect();
            let last = keys.pop().filter(|k| !k.is_empty());
            let Some(last) = last else {
                return Err(bad(format!("`{path}` is not a key path")));
            };
            let mut at = &mut doc;
            for key in keys {
                at = at
                    .as_object_mut()
                    .and_then(|o| o.get_mut(key))
                    .ok_or_else(|| bad(format!("`{path}`: the config has no section `{key}`")))?;
            }
            let table = at
                .as_object_mut()
                .ok_or_else(|| bad(format!("`{path}`: not inside a section")))?;
            let value = match (table.get(last), value.as_f64()) {
                (Some(old), Some(x)) if old.is_u64() || old.is_i64() => {
                    serde_json::json!(x.round() as i64)
                }
                _ => value.clone(),
            };
            table.insert(last.to_string(), value);
        }
        let bytes = serde_json::to_vec(&doc).expect("JSON values serialise");
        let cfg: RunConfig = from_json_keyed(&bytes).map_err(bad)?;
        cfg.validate()?;
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cfg() -> RunConfig {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../config/cartpole-dqn-async.toml"
        );
        RunConfig::load(std::path::Path::new(path)).unwrap()
    }

    #[test]
    fn values_are_read_and_replaced_by_key_path() {
        let base = cfg();
        assert_eq!(base.value_at("dqn.lr"), Some(json!(0.0005)));
        assert_eq!(base.value_at("dqn.nope"), None);
        let c = base
            .with_values(&[
                ("dqn.lr".into(), json!(0.001)),
                ("dqn.batch_size".into(), json!(31.6)),
                ("seed".into(), json!(7)),
            ])
            .unwrap();
        assert_eq!((c.dqn.lr, c.dqn.batch_size, c.seed), (0.001, 32, 7));
        assert_eq!(c.dqn.gamma, base.dqn.gamma);
    }

    #[test]
    fn assignments_read_toml_values_or_strings() {
        let p = |s: &str| parse_assignment(s).unwrap();
        assert_eq!(p("dqn.lr=0.001"), ("dqn.lr".into(), json!(0.001)));
        assert_eq!(p("seed = 3"), ("seed".into(), json!(3)));
        assert_eq!(
            p("dqn.hidden=[64, 64]"),
            ("dqn.hidden".into(), json!([64, 64]))
        );
        assert_eq!(p("env=CartPole-v1"), ("env".into(), json!("CartPole-v1")));
        assert_eq!(p("name=\"x y\""), ("name".into(), json!("x y")));
        assert!(parse_assignment("dqn.lr").is_err());
        assert!(parse_assignment("=3").is_err());
    }

    #[test]
    fn a_bad_path_or_value_is_named() {
        let base = cfg();
        let e = base
            .with_values(&[("dqn.lrr".into(), json!(0.1))])
            .unwrap_err()
            .to_string();
        assert!(e.contains("dqn.lrr = 0.1") && e.contains("`lr`"), "{e}");
        let e = base
            .with_values(&[("nosection.x".into(), json!(1))])
            .unwrap_err()
            .to_string();
        assert!(e.contains("no section `nosection`"), "{e}");
        let e = base
            .with_values(&[("dqn.gamma".into(), json!(1.5))])
            .unwrap_err()
            .to_string();
        assert!(e.contains("gamma"), "{e}");
    }
}

//! The config reference (`docs/config-reference.md`), generated from the
//! schemas the run config and `server.toml` derive: every key with its
//! type, default, allowed values and doc comment, so it cannot drift from
//! what the parsers accept.

use crate::server_config::ServerConfig;
use rlfleet_shared::config::RunConfig;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A schema, the named schemas its `$ref`s point at, and a value with
/// every default filled in.
struct Schemas {
    root: Value,
    named: BTreeMap<String, Value>,
    defaults: Value,
}

impl Schemas {
    fn of<T: utoipa::ToSchema + serde::Serialize>(defaults: &T) -> Schemas {
        let mut refs = Vec::new();
        T::schemas(&mut refs);
        let named = refs
            .into_iter()
            .map(|(name, schema)| (name, to_value(&schema)))
            .collect();
        Schemas {
            root: to_value(&T::schema()),
            named,
            defaults: serde_json::to_value(defaults).expect("a config serialises"),
        }
    }

    fn run() -> Schemas {
        // The keys without a default, as the smallest config gives them.
        let smallest = "name = \"NAME\"\nenv = \"CartPole-v1\"\nagent = \"dqn\"\n\
                        workflow = \"single\"\noutput_dir = \"OUT\"\n";
        let config: RunConfig = toml::from_str(smallest).expect("the smallest config parses");
        Schemas::of(&config)
    }

    fn server() -> Schemas {
        Schemas::of(&ServerConfig::default())
    }

    /// The default at a dotted key path (`None`: unset).
    fn default_at(&self, path: &str) -> Option<&Value> {
        path.split('.')
            .try_fold(&self.defaults, |v, k| v.get(k))
            .filter(|v| !v.is_null())
    }

    /// `schema` itself, or what it stands for: the named schema its
    /// `$ref` points at, or the one entry of its `oneOf`/`allOf`.
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            return self
                .named
                .get(r.rsplit('/').next().unwrap_or(r))
                .unwrap_or(schema);
        }
        for k in ["oneOf", "allOf"] {
            if let Some([one]) = schema.get(k).and_then(Value::as_array).map(Vec::as_slice) {
                return self.resolve(one);
            }
        }
        schema
    }
}

fn to_value<S: serde::Serialize>(schema: &S) -> Value {
    serde_json::to_value(schema).expect("a schema serialises")
}

/// One key of a table.
struct Key {
    path: String,
    kind: String,
    default: String,
    allowed: String,
    doc: Option<String>,
}

/// One table: its path (`""` for the top level), its doc and its keys.
struct Table {
    path: String,
    doc: Option<String>,
    keys: Vec<Key>,
}

/// Every table of the schema, the top level first, then each nested
/// table in order.
fn tables(schemas: &Schemas) -> Vec<Table> {
    let mut out = Vec::new();
    walk(schemas, &schemas.root, String::new(), &mut out);
    out
}

fn walk(schemas: &Schemas, schema: &Value, path: String, out: &mut Vec<Table>) {
    let empty = Map::new();
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut table = Table {
        path: path.clone(),
        doc: doc_of(schema),
        keys: Vec::new(),
    };
    let mut nested = Vec::new();
    for (name, prop) in props {
        let target = schemas.resolve(prop);
        let key_path = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        if target.get("properties").is_some() {
            nested.push((key_path, target));
            continue;
        }
        table.keys.push(Key {
            kind: kind_of(prop, target),
            default: if required.contains(&name.as_str()) {
                "required".to_string()
            } else {
                schemas
                    .default_at(&key_path)
                    .map_or_else(|| "unset".to_string(), |v| format!("`{}`", show_value(v)))
            },
            allowed: allowed_of(prop, target),
            doc: doc_of(prop).or_else(|| doc_of(target)),
            path: key_path,
        });
    }
    out.push(table);
    for (key_path, target) in nested {
        walk(schemas, target, key_path, out);
    }
}

fn doc_of(schema: &Value) -> Option<String> {
    let text = schema.get("description")?.as_str()?;
    Some(text.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// `integer`, `float`, `string`, `boolean`, `list of …`, `table`, with
/// `optional` for a key that may be left unset.
fn kind_of(prop: &Value, target: &Value) -> String {
    let types: Vec<&str> = match target.get("type").or_else(|| prop.get("type")) {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let optional = types.contains(&"null");
    let base = types
        .iter()
        .find(|t| **t != "null")
        .map(|t| match *t {
            "number" => "float".to_string(),
            "object" => "table".to_string(),
            "array" => {
                let item = target.get("items").map_or(String::new(), |i| {
                    kind_of(i, i).trim_end_matches(" (optional)").to_string()
                });
                format!("list of {item}")
            }
            other => other.to_string(),
        })
        .unwrap_or_else(|| "value".to_string());
    if optional {
        format!("{base} (optional)")
    } else {
        base
    }
}

/// The values a key takes: its enum, its numeric range, its length, or
/// its pattern.
fn allowed_of(prop: &Value, target: &Value) -> String {
    if let Some(values) = target.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .filter(|v| !v.is_null())
            .map(|v| format!("`{}`", v.as_str().map_or(v.to_string(), str::to_string)))
            .collect::<Vec<_>>()
            .join(", ");
    }
    let mut parts = Vec::new();
    if let Some(r) = range(target) {
        parts.push(r);
    }
    if let Some(items) = target.get("items").and_then(range) {
        parts.push(format!("each {items}"));
    }
    let count = |min: &str, max: &str, what: &str| {
        let lo = target.get(min).and_then(Value::as_u64);
        let hi = target.get(max).and_then(Value::as_u64);
        match (lo, hi) {
            (Some(lo), Some(hi)) => Some(format!("{lo} to {hi} {what}")),
            (Some(lo), None) => Some(format!("at least {lo} {what}")),
            (None, Some(hi)) => Some(format!("at most {hi} {what}")),
            (None, None) => None,
        }
    };
    parts.extend(count("minItems", "maxItems", "entries"));
    parts.extend(count("minLength", "maxLength", "characters"));
    // A long pattern (`env`'s) says less than the key's doc.
    if let Some(p) = target.get("pattern").or_else(|| prop.get("pattern")) {
        let p = p.as_str().unwrap_or_default();
        if p.len() <= 40 {
            parts.push(format!("matches `{p}`"));
        }
    }
    parts.join("; ")
}

/// A numeric range as `≥ 1`, `> 0`, `≤ 1` or both ends.
fn range(schema: &Value) -> Option<String> {
    let num = |k: &str| schema.get(k).filter(|v| v.is_number()).map(show_value);
    let low = num("minimum")
        .map(|v| format!("≥ {v}"))
        .or_else(|| num("exclusiveMinimum").map(|v| format!("> {v}")));
    let high = num("maximum")
        .map(|v| format!("≤ {v}"))
        .or_else(|| num("exclusiveMaximum").map(|v| format!("< {v}")));
    match (low, high) {
        (Some(l), Some(h)) => Some(format!("{l}, {h}")),
        (l, h) => l.or(h),
    }
}

/// A default as TOML writes it.
fn show_value(v: &Value) -> String {
    match v {
        Value::Null => "unset".to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(show_value).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::Object(o) if o.is_empty() => "{}".to_string(),
        other => other.to_string(),
    }
}

/// Keys whose field has no doc comment (nor a documented type).
fn undocumented(schemas: &Schemas) -> Vec<String> {
    tables(schemas)
        .into_iter()
        .flat_map(|t| {
            let table_missing = (!t.path.is_empty() && t.doc.is_none()).then(|| t.path.clone());
            t.keys
                .into_iter()
                .filter(|k| k.doc.is_none())
                .map(|k| k.path)
                .chain(table_missing)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The keys of the run config and of `server.toml` that have no doc
/// comment (the reference test fails on any).
pub fn undocumented_keys() -> Vec<String> {
    let mut keys = undocumented(&Schemas::run());
    keys.extend(
        undocumented(&Schemas::server())
            .into_iter()
            .map(|k| format!("server.toml: {k}")),
    );
    keys
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn write_tables(md: &mut String, tables: &[Table]) {
    for t in tables {
        let title = if t.path.is_empty() {
            "Top level".to_string()
        } else {
            format!("`[{}]`", t.path)
        };
        let _ = writeln!(md, "### {title}\n");
        if let Some(doc) = &t.doc {
            let _ = writeln!(md, "{}\n", doc);
        }
        if t.keys.is_empty() {
            continue;
        }
        let _ = writeln!(md, "| key | type | default | allowed | what |");
        let _ = writeln!(md, "|---|---|---|---|---|");
        for k in &t.keys {
            let name = k.path.rsplit('.').next().unwrap_or(&k.path);
            let _ = writeln!(
                md,
                "| `{}` | {} | {} | {} | {} |",
                name,
                k.kind,
                cell(&k.default),
                cell(&k.allowed),
                cell(k.doc.as_deref().unwrap_or("")),
            );
        }
        let _ = writeln!(md);
    }
}

/// `docs/config-reference.md`.
pub fn markdown() -> String {
    let mut md = String::from(
        "<!-- Generated from the config schemas by `cargo test -p learner-server reference`; \
         do not edit by hand. -->\n\n# Config reference\n\n\
         Every key of a run config and of the daemon's `server.toml`, with its type, default, \
         the values it allows and what it does. Rules that span keys (a workflow's agents \
         and transports, a buffer at least the batch) are checked too: \
         `learner-server check CONFIG` names the one a config breaks. How to write and \
         override a config: [Configs](config.md).\n\n\
         ## Run config\n\n\
         One training run (`learner-server run CONFIG`, `POST /v1/runs` as JSON). \
         Only the agent table of the run's `agent` may differ from its defaults.\n\n",
    );
    write_tables(&mut md, &tables(&Schemas::run()));
    md.push_str(
        "## Server config\n\n\
         The daemon's `server.toml` (`learner-server serve --config FILE`; check one with \
         `learner-server check --server FILE`).\n\n",
    );
    write_tables(&mut md, &tables(&Schemas::server()));
    md.truncate(md.trim_end().len());
    md.push('\n');
    md
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn every_config_key_has_a_doc_comment() {
        let missing = super::undocumented_keys();
        assert!(
            missing.is_empty(),
            "config keys without a doc comment: {missing:?}"
        );
    }

    #[test]
    fn the_env_key_names_every_built_in_env() {
        let md = super::markdown();
        let env_row = md.lines().find(|l| l.starts_with("| `env` |")).unwrap();
        for id in rlfleet_shared::env::ENV_IDS {
            assert!(
                env_row.contains(&format!("`{id}`")),
                "`env`'s doc lacks {id}"
            );
        }
    }

    /// As rust-analyzer's generated files: a stale reference is rewritten
    /// and the test fails, so the new one is committed.
    #[test]
    fn the_config_reference_in_docs_is_current() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/config-reference.md");
        let want = super::markdown();
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != want {
            std::fs::write(&path, &want).expect("write docs/config-reference.md");
            panic!(
                "docs/config-reference.md was not what the config schemas give; \
                 it is rewritten now: commit it"
            );
        }
    }
}

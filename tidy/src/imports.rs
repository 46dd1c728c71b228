//! A crate's modules and the references between them: every `crate::…`
//! and `super::…` path its non-test source names (use trees expanded,
//! doc links included), resolved to the module that holds the name.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A module path under the crate root (`["workflows", "remote"]`); the
/// root itself is empty.
pub type ModPath = Vec<String>;

/// One source file, its path relative to the crate's `src/`.
#[derive(Debug, Clone)]
pub struct Source {
    pub rel: PathBuf,
    pub text: String,
}

/// A name one module's source takes from another module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The module whose file names it.
    pub from: ModPath,
    /// The module the name lives in (the longest known module prefix).
    pub to: ModPath,
    /// Where: the file (relative to `src/`) and its 1-based line.
    pub file: PathBuf,
    pub line: usize,
    /// The path as written, use trees expanded (`crate::hub::Hub`).
    pub path: String,
}

/// A crate's modules (one per file) and the references between them.
#[derive(Debug, Clone, Default)]
pub struct CrateGraph {
    pub modules: BTreeSet<ModPath>,
    pub refs: Vec<Reference>,
}

/// Reads every `.rs` file under `src` (sorted, so reports are stable).
pub fn read_sources(src: &Path) -> std::io::Result<Vec<Source>> {
    let mut out = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path)?;
                let rel = path.strip_prefix(src).expect("under src").to_path_buf();
                out.push(Source { rel, text });
            }
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// Whether a file holds only tests: `tests.rs`, `…_tests.rs`, or anything
/// under a `tests/` folder.
pub fn is_test_file(rel: &Path) -> bool {
    rel.file_name()
        .and_then(|f| f.to_str())
        .is_some_and(|f| f == "tests.rs" || f.ends_with("_tests.rs"))
        || rel
            .parent()
            .is_some_and(|p| p.components().any(|c| c.as_os_str() == "tests"))
}

/// The part of a file before its test modules: everything above the first
/// `#[cfg(test)]` (at the start of a line) that opens an inline module
/// (`mod tests {`). A `#[cfg(test)] mod tests;` declaration does not cut:
/// its file is a test file of its own. (The project keeps test modules at
/// the end of a file; `files::check_tests_last` holds it.)
pub fn non_test(text: &str) -> &str {
    let mut at = 0;
    let mut gate = None;
    for line in text.split_inclusive('\n') {
        let t = line.trim_end();
        if t == "#[cfg(test)]" {
            gate.get_or_insert(at);
        } else if let Some(start) = gate {
            if t.starts_with("#[") || t.starts_with("//") {
                // More attributes or docs on the same item.
            } else if t.starts_with("mod ") && t.contains('{') {
                return &text[..start];
            } else {
                gate = None;
            }
        }
        at += line.len();
    }
    text
}

/// The module a file defines (`workflows/remote/mod.rs` and
/// `workflows/remote.rs` are both `workflows::remote`; `lib.rs` and
/// `main.rs` are the root).
pub fn module_of(rel: &Path) -> ModPath {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|l| matches!(l.as_str(), "mod" | "lib" | "main"))
    {
        parts.pop();
    }
    parts
}

impl CrateGraph {
    /// The graph of these sources (test files and test modules left out).
    pub fn build(sources: &[Source]) -> CrateGraph {
        let sources: Vec<&Source> = sources.iter().filter(|s| !is_test_file(&s.rel)).collect();
        let modules: BTreeSet<ModPath> = sources.iter().map(|s| module_of(&s.rel)).collect();
        let mut refs = Vec::new();
        for s in sources {
            let from = module_of(&s.rel);
            let text = non_test(&s.text);
            for (offset, path) in paths_in(text) {
                let Some(abs) = absolute(&from, &path) else {
                    continue;
                };
                let to = longest_module(&modules, &abs);
                refs.push(Reference {
                    from: from.clone(),
                    to,
                    file: s.rel.clone(),
                    line: text[..offset].matches('\n').count() + 1,
                    path: path.join("::"),
                });
            }
        }
        CrateGraph { modules, refs }
    }

    /// The edges between modules cut to `depth` segments, each with the
    /// references that make it. Edges between a module and its own
    /// ancestors or descendants are left out (a parent re-exports its
    /// children; a child may use its parent's names).
    pub fn edges(&self, depth: usize) -> Vec<(ModPath, ModPath, Vec<&Reference>)> {
        let mut out: std::collections::BTreeMap<(ModPath, ModPath), Vec<&Reference>> =
            Default::default();
        for r in &self.refs {
            let a = cut(&r.from, depth);
            let b = cut(&r.to, depth);
            if a.starts_with(&b) || b.starts_with(&a) {
                continue;
            }
            out.entry((a, b)).or_default().push(r);
        }
        out.into_iter().map(|((a, b), rs)| (a, b, rs)).collect()
    }

    /// The deepest module path in the crate.
    pub fn max_depth(&self) -> usize {
        self.modules.iter().map(Vec::len).max().unwrap_or(0)
    }
}

fn cut(m: &ModPath, depth: usize) -> ModPath {
    m[..m.len().min(depth)].to_vec()
}

fn longest_module(modules: &BTreeSet<ModPath>, path: &[String]) -> ModPath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
        .unwrap_or_default()
}

/// A written path made absolute from module `from`: `crate::a::b` is
/// `a::b`; `super::x` is `x` under `from`'s parent. `None` for paths that
/// cannot leave the module (`self::…`).
fn absolute(from: &ModPath, path: &[String]) -> Option<Vec<String>> {
    let mut segs = path.iter().peekable();
    let mut base = match segs.next().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") => {
            let mut b = from.clone();
            b.pop()?;
            while segs.peek().is_some_and(|s| *s == "super") {
                segs.next();
                b.pop()?;
            }
            b
        }
        _ => return None,
    };
    base.extend(segs.filter(|s| *s != "self" && *s != "*").cloned());
    Some(base)
}

/// Every `crate::…` and `super::…` path in `text`, with the byte offset
/// where it starts; a use tree (`crate::{a::X, b::{Y, Z}}`) gives one
/// path per leaf.
pub fn paths_in(text: &str) -> Vec<(usize, Vec<String>)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    for kw in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(pos) = text[from..].find(kw) {
            let at = from + pos;
            from = at + kw.len();
            let before = at.checked_sub(1).map(|i| bytes[i]);
            if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$') {
                continue;
            }
            let mut i = from;
            let mut leaves = Vec::new();
            tree(
                bytes,
                &mut i,
                vec![kw.trim_end_matches(':').to_string()],
                &mut leaves,
            );
            out.extend(leaves.into_iter().map(|l| (at, l)));
        }
    }
    out.sort_by_key(|(at, _)| *at);
    out
}

fn skip_space(b: &[u8], i: &mut usize) {
    while *i < b.len() && b[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

/// Parses one use (sub)tree at `i` under `prefix`.
fn tree(b: &[u8], i: &mut usize, mut prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    loop {
        skip_space(b, i);
        if *i < b.len() && b[*i] == b'{' {
            *i += 1;
            loop {
                skip_space(b, i);
                if *i >= b.len() {
                    return;
                }
                if b[*i] == b'}' {
                    *i += 1;
                    return;
                }
                let before = *i;
                tree(b, i, prefix.clone(), out);
                skip_space(b, i);
                if *i < b.len() && b[*i] == b',' {
                    *i += 1;
                } else if *i == before {
                    // Not a use tree after all: stop rather than spin.
                    return;
                }
            }
        }
        let start = *i;
        while *i < b.len() && (b[*i].is_ascii_alphanumeric() || b[*i] == b'_' || b[*i] == b'*') {
            *i += 1;
        }
        if *i == start {
            out.push(prefix);
            return;
        }
        prefix.push(String::from_utf8_lossy(&b[start..*i]).into_owned());
        if b[*i..].starts_with(b"::") {
            *i += 2;
        } else {
            out.push(prefix);
            return;
        }
    }
}

//! The layer rule: a crate's top-level modules in an order, bottom first,
//! where each imports only modules on lines below its own; and, at every
//! depth of the module tree, no import cycle.
//!
//! The order is written once, in ARCHITECTURE.md, as a fenced block whose
//! info string is `layers CRATE`, one line per layer, peers on one line
//! separated by spaces (peers import nothing from each other).

use crate::imports::{CrateGraph, ModPath, Reference};
use std::collections::BTreeMap;

/// A crate's declared layers, bottom first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layers {
    pub krate: String,
    pub lines: Vec<Vec<String>>,
}

/// Every `layers CRATE` block of a markdown document.
pub fn parse_layers(markdown: &str) -> Vec<Layers> {
    let mut out = Vec::new();
    let mut current: Option<Layers> = None;
    for line in markdown.lines() {
        let t = line.trim();
        match &mut current {
            None => {
                if let Some(rest) = t.strip_prefix("```layers ") {
                    current = Some(Layers {
                        krate: rest.trim().to_string(),
                        lines: Vec::new(),
                    });
                }
            }
            Some(l) => {
                if t.starts_with("```") {
                    out.push(current.take().expect("open block"));
                } else if !t.is_empty() {
                    l.lines
                        .push(t.split_whitespace().map(str::to_string).collect());
                }
            }
        }
    }
    out
}

impl Layers {
    fn level(&self, module: &str) -> Option<usize> {
        self.lines
            .iter()
            .position(|l| l.iter().any(|m| m == module))
    }
}

fn show(m: &ModPath) -> String {
    if m.is_empty() {
        "<root>".to_string()
    } else {
        m.join("::")
    }
}

fn at(r: &Reference, src: &str) -> String {
    format!("{src}/{}:{} `{}`", r.file.display(), r.line, r.path)
}

/// What breaks the declared layers: a top-level module not declared (or
/// declared and absent, or declared twice), and every import of a module
/// on the same or a higher line, each named with the file, line and path
/// that makes it. `src` is how reports name the crate's source folder.
pub fn check_layers(graph: &CrateGraph, layers: &Layers, src: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let top: Vec<String> = graph
        .modules
        .iter()
        .filter(|m| m.len() == 1)
        .map(|m| m[0].clone())
        .collect();
    for m in &top {
        if layers.level(m).is_none() {
            problems.push(format!(
                "{}: module `{m}` is in no layer of ARCHITECTURE.md's `layers {}` block",
                layers.krate, layers.krate
            ));
        }
    }
    let mut seen = BTreeMap::new();
    for m in layers.lines.iter().flatten() {
        if !top.contains(m) {
            problems.push(format!(
                "{}: ARCHITECTURE.md's layers name `{m}`, which is not a module of the crate",
                layers.krate
            ));
        }
        if seen.insert(m.clone(), ()).is_some() {
            problems.push(format!("{}: `{m}` is in two layers", layers.krate));
        }
    }
    for (a, b, refs) in graph.edges(1) {
        let (Some(la), Some(lb)) = (layers.level(&a[0]), layers.level(&b[0])) else {
            continue;
        };
        if lb >= la {
            let how = if lb == la {
                "its peer"
            } else {
                "a higher layer"
            };
            for r in refs {
                problems.push(format!(
                    "{}: `{}` imports `{}`, {how}: {}",
                    layers.krate,
                    show(&a),
                    show(&b),
                    at(r, src)
                ));
            }
        }
    }
    problems
}

/// Every import cycle among the crate's modules, at each depth of the
/// module tree (depth 1: `hub`, `workflows`; depth 2:
/// `workflows::remote`), each with the edges that close it.
pub fn check_cycles(graph: &CrateGraph, krate: &str, src: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut reported: Vec<Vec<ModPath>> = Vec::new();
    for depth in 1..=graph.max_depth().max(1) {
        let edges = graph.edges(depth);
        let mut adj: BTreeMap<ModPath, Vec<ModPath>> = BTreeMap::new();
        for (a, b, _) in &edges {
            adj.entry(a.clone()).or_default().push(b.clone());
            adj.entry(b.clone()).or_default();
        }
        for comp in strongly_connected(&adj) {
            if comp.len() < 2 || reported.contains(&comp) {
                continue;
            }
            let names: Vec<String> = comp.iter().map(show).collect();
            let mut text = format!(
                "{krate}: an import cycle of {} modules: {}",
                comp.len(),
                names.join(", ")
            );
            for (a, b, refs) in &edges {
                if comp.contains(a) && comp.contains(b) {
                    text.push_str(&format!(
                        "\n    {} -> {}: {}",
                        show(a),
                        show(b),
                        at(refs[0], src)
                    ));
                }
            }
            problems.push(text);
            reported.push(comp);
        }
    }
    problems
}

/// Tarjan's strongly connected components, each sorted.
fn strongly_connected(adj: &BTreeMap<ModPath, Vec<ModPath>>) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        adj: &'a BTreeMap<ModPath, Vec<ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on: std::collections::BTreeSet<&'a ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in &s.adj[v] {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            comp.sort();
            s.out.push(comp);
        }
    }
    let mut s = State {
        adj,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: Default::default(),
        out: Vec::new(),
    };
    for v in adj.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

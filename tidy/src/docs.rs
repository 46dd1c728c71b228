//! The manual and the other Markdown files stand alone: every relative
//! link reaches a file of the repository (and its `#anchor` a heading
//! there), every repository path named in code (`config/x.toml`) and
//! every Markdown file named anywhere (`BENCHMARKS.md`) exists, so nothing
//! points at a document outside the repository, and every Prometheus
//! series the learner exports is in `docs/metrics.md`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The Markdown files checked: the root's, `dashboards/` and `docs/`.
pub fn markdown_files(root: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"]
        .iter()
        .map(|f| root.join(f))
        .collect();
    files.push(root.join("dashboards/README.md"));
    let docs = root.join("docs");
    if docs.is_dir() {
        let mut pages: Vec<PathBuf> = std::fs::read_dir(&docs)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        pages.sort();
        files.extend(pages);
    }
    Ok(files.into_iter().filter(|f| f.is_file()).collect())
}

/// The lines of `text` outside fenced code blocks, with their numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        // An indented block is code too (four spaces, outside a list).
        if !fenced && !line.starts_with("    ") {
            out.push((i + 1, line));
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, punctuation dropped,
/// spaces as hyphens.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings.
pub fn anchors(text: &str) -> BTreeSet<String> {
    prose_lines(text)
        .into_iter()
        .filter_map(|(_, l)| {
            let hashes = l.len() - l.trim_start_matches('#').len();
            (hashes > 0 && l[hashes..].starts_with(' ')).then(|| slug(&l[hashes..]))
        })
        .collect()
}

/// The targets of the inline links `[text](target)` on a line.
fn link_targets(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        match after.find(')') {
            Some(j) => {
                out.push(after[..j].trim());
                rest = &after[j..];
            }
            None => break,
        }
    }
    out
}

/// The inline code spans of a line.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s)
        .collect()
}

/// The Markdown file names on a line (`BENCHMARKS.md`, `docs/mpi.md`),
/// web addresses and link targets (checked as links) left out.
fn markdown_names(line: &str) -> Vec<&str> {
    let mut prose = line;
    let mut kept = Vec::new();
    while let Some(i) = prose.find("](") {
        kept.push(&prose[..i]);
        prose = prose[i..].find(')').map_or("", |j| &prose[i + j..]);
    }
    kept.push(prose);
    kept.into_iter()
        .flat_map(words)
        .filter(|w| w.len() > 3 && w.ends_with(".md"))
        .collect()
}

/// The path-like words of `text`, without a sentence's closing dot; a
/// word with a `:` (a web address) is left out.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-' | ':')))
        .filter(|w| !w.contains(':'))
        .map(|w| w.trim_end_matches('.'))
}

/// Top folders of the repository whose paths the docs name in code.
const REPO_DIRS: [&str; 15] = [
    "config/",
    "scripts/",
    "systemd/",
    "slurm/",
    "docs/",
    "dashboards/",
    "python/",
    "bench/",
    "crates/",
    "shared/",
    "learner-server/",
    "actor-client/",
    "tests/",
    "tidy/",
    "checkpoint/",
];

/// A code span that is a plain repository path (no pattern, no
/// placeholder), such as `config/cartpole-dqn-async.toml`.
fn repo_path(span: &str) -> Option<&str> {
    let plain = span
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-'));
    (plain && REPO_DIRS.iter().any(|d| span.starts_with(d))).then_some(span)
}

/// Problems of one Markdown file: broken links and anchors, paths that
/// do not exist, references to files outside the repository.
pub fn check_file(root: &Path, file: &Path) -> std::io::Result<Vec<String>> {
    let text = std::fs::read_to_string(file)?;
    let name = file
        .strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string();
    let dir = file.parent().unwrap_or(root);
    let mut problems = Vec::new();
    for (n, line) in prose_lines(&text) {
        for doc in markdown_names(line) {
            if !root.join(doc).exists() && !dir.join(doc).exists() {
                problems.push(format!(
                    "{name}:{n}: names {doc}, which is not in the repository"
                ));
            }
        }
        for target in link_targets(line) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target, None),
            };
            let linked = if path.is_empty() {
                file.to_path_buf()
            } else {
                dir.join(path)
            };
            if !linked.exists() {
                problems.push(format!("{name}:{n}: link to `{target}`: no such file"));
                continue;
            }
            if let Some(anchor) = anchor {
                let headings = anchors(&std::fs::read_to_string(&linked).unwrap_or_default());
                if !headings.contains(anchor) {
                    problems.push(format!(
                        "{name}:{n}: link to `{target}`: no heading with that anchor"
                    ));
                }
            }
        }
        for span in code_spans(line) {
            if let Some(path) = repo_path(span)
                && !root.join(path).exists()
            {
                problems.push(format!("{name}:{n}: `{path}` is not in the repository"));
            }
        }
    }
    Ok(problems)
}

/// The Prometheus series the learner registers (`"rlfleet_…"` literals in
/// the metrics sources) that `docs/metrics.md` does not name.
pub fn check_metrics(root: &Path) -> std::io::Result<Vec<String>> {
    let doc = std::fs::read_to_string(root.join("docs/metrics.md")).unwrap_or_default();
    let mut problems = Vec::new();
    for source in ["families.rs", "mod.rs"] {
        let path = root.join("crates/run/src/metrics").join(source);
        let text = std::fs::read_to_string(&path)?;
        // The test module's literals are not series.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for piece in code.split("\"rlfleet_").skip(1) {
            let series: String = piece
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            // A series is registered as `Opts::new("rlfleet_…", "help")`.
            let after = piece[series.len()..].trim_start_matches('"');
            let registered = piece[series.len()..].starts_with('"')
                && after.trim_start_matches(',').trim_start().starts_with('"');
            let series = format!("rlfleet_{series}");
            if registered && !doc.contains(&format!("`{series}`")) {
                problems.push(format!(
                    "docs/metrics.md does not describe `{series}` (crates/run/src/metrics/{source})"
                ));
            }
        }
    }
    Ok(problems)
}

/// Every problem of the repository's Markdown.
pub fn check_docs(root: &Path) -> std::io::Result<Vec<String>> {
    let mut problems = Vec::new();
    for file in markdown_files(root)? {
        problems.extend(check_file(root, &file)?);
    }
    problems.extend(check_metrics(root)?);
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_github() {
        assert_eq!(slug("What a run leaves behind"), "what-a-run-leaves-behind");
        assert_eq!(slug("`[runs]` and TLS: names"), "runs-and-tls-names");
        assert_eq!(slug("Central inference (`seed`)"), "central-inference-seed");
    }

    #[test]
    fn a_broken_link_a_missing_anchor_and_a_missing_path_are_found() {
        let root = std::env::temp_dir().join(format!("tidy-docs-{}", std::process::id()));
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::create_dir_all(root.join("config")).unwrap();
        std::fs::write(root.join("config/a.toml"), "").unwrap();
        std::fs::write(root.join("docs/b.md"), "# B\n\n## Part two\n").unwrap();
        std::fs::write(
            root.join("docs/a.md"),
            "# A\n\n[ok](b.md#part-two) [gone](c.md) [bad](b.md#part-three)\n\
             `config/a.toml` `config/missing.toml` `config/*.toml`\n\
             ```\n[in code](nowhere.md)\n```\nsee NOWHERE.md.\n",
        )
        .unwrap();
        let problems = check_file(&root, &root.join("docs/a.md")).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        let joined = problems.join("\n");
        assert_eq!(problems.len(), 4, "{joined}");
        assert!(joined.contains("`c.md`: no such file"), "{joined}");
        assert!(joined.contains("`b.md#part-three`: no heading"), "{joined}");
        assert!(joined.contains("`config/missing.toml` is not"), "{joined}");
        assert!(joined.contains("names NOWHERE.md"), "{joined}");
    }
}

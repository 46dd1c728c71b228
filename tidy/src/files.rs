//! File rules: every source file opens with a `//!` line that says what
//! it holds, and a file's non-test code stays within a line budget (a file
//! of one concept; past the budget it is several).

use crate::imports::{Source, is_test_file, non_test};

/// The most lines of non-test code a file may have.
pub const MAX_LINES: usize = 400;

/// Files with code after their test modules: the budget and the import
/// rules read only what comes before the first `#[cfg(test)]`, so every
/// item after it must be test code too (each under its own
/// `#[cfg(test)]`).
pub fn check_tests_last(sources: &[Source], src: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for s in sources.iter().filter(|s| !is_test_file(&s.rel)) {
        let start = non_test(&s.text).lines().count();
        // Whether the attributes and docs above the current line include
        // `#[cfg(test)]`.
        let mut gated = false;
        for (i, line) in s.text.lines().enumerate().skip(start) {
            let at_top = !line.starts_with([' ', '\t', '}', ')', ']']) && !line.is_empty();
            if !at_top {
                continue;
            }
            if line.trim_end() == "#[cfg(test)]" {
                gated = true;
            } else if line.starts_with("#[") || line.starts_with("//") {
                // More attributes or comments before the item.
            } else {
                if !gated {
                    problems.push(format!(
                        "{src}/{}:{}: code after the test modules (move it above the first `#[cfg(test)]`)",
                        s.rel.display(),
                        i + 1
                    ));
                }
                gated = false;
            }
        }
    }
    problems
}

/// Items with behaviour (`impl` blocks, functions) in files under `dir`
/// (relative to `src`): there, types are plain data.
pub fn check_plain_data(sources: &[Source], src: &str, dir: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for s in sources.iter().filter(|s| s.rel.starts_with(dir)) {
        for (i, line) in non_test(&s.text).lines().enumerate() {
            let t = line.trim_start();
            let code = t.starts_with("impl") || t.starts_with("fn ") || t.contains(" fn ");
            if code && !t.starts_with("//") {
                problems.push(format!(
                    "{src}/{}:{}: behaviour in `{dir}`, which holds plain data only: `{}`",
                    s.rel.display(),
                    i + 1,
                    t
                ));
            }
        }
    }
    problems
}

/// Clock reads (`Instant::now`, `.elapsed()`, `SystemTime::now`) in
/// files under `dir` other than `allowed` (relative to `src`): there, time
/// comes in as an argument.
pub fn check_no_clock(sources: &[Source], src: &str, dir: &str, allowed: &[&str]) -> Vec<String> {
    let reads = ["Instant::now", ".elapsed()", "SystemTime::now"];
    let what = ("reads the clock", "where time is passed in");
    check_absent(sources, (src, dir), allowed, &reads, what)
}

/// File access (`std::fs`, `File::`, `OpenOptions`, the run's output
/// files) in files under `dir` other than `allowed`: there, what is to be
/// written is returned as an effect for the driver to perform.
pub fn check_no_files(sources: &[Source], src: &str, dir: &str, allowed: &[&str]) -> Vec<String> {
    let touches = [
        "std::fs",
        "File::",
        "OpenOptions",
        "RunOutput",
        "CsvFile",
        "read_episodes",
        "read_evals",
        "plot_learning_curve",
    ];
    let what = ("touches files", "where the driver performs what is written");
    check_absent(sources, (src, dir), allowed, &touches, what)
}

/// Lines (outside tests and comments) of files under `dir` other than
/// `allowed` that contain one of `needles`, each named with its file,
/// line and `what` (what it does, and why that is not done there).
fn check_absent(
    sources: &[Source],
    (src, dir): (&str, &str),
    allowed: &[&str],
    needles: &[&str],
    (what, why): (&str, &str),
) -> Vec<String> {
    let mut problems = Vec::new();
    for s in sources.iter().filter(|s| s.rel.starts_with(dir)) {
        if is_test_file(&s.rel) || allowed.iter().any(|a| s.rel == std::path::Path::new(a)) {
            continue;
        }
        for (i, line) in non_test(&s.text).lines().enumerate() {
            let t = line.trim_start();
            if needles.iter().any(|c| t.contains(c)) && !t.starts_with("//") {
                problems.push(format!(
                    "{src}/{}:{}: {what} in `{dir}`, {why}: `{t}`",
                    s.rel.display(),
                    i + 1
                ));
            }
        }
    }
    problems
}

/// `unsafe` outside the files `allowed` to hold it (relative to `src`),
/// and any `unsafe` block or function without a `SAFETY` note (or, for a
/// function, a `# Safety` section) on its line or in the comments right
/// above it.
pub fn check_unsafe(sources: &[Source], src: &str, allowed: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    for s in sources.iter().filter(|s| !is_test_file(&s.rel)) {
        let lines: Vec<&str> = non_test(&s.text).lines().collect();
        let here = allowed.iter().any(|a| s.rel == std::path::Path::new(a));
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            if t.starts_with("//") || !(t.contains("unsafe {") || t.contains("unsafe fn")) {
                continue;
            }
            let at = format!("{src}/{}:{}", s.rel.display(), i + 1);
            if !here {
                problems.push(format!(
                    "{at}: `unsafe` outside the files that may hold it: `{t}`"
                ));
                continue;
            }
            // The note: on the line, or in the comments and attributes
            // right above it.
            let above = lines[..i].iter().rev().take_while(|l| {
                let l = l.trim_start();
                l.starts_with("//") || l.starts_with("#[")
            });
            let note = |l: &&str| l.contains("SAFETY") || l.contains("# Safety");
            let noted = note(line) || above.into_iter().any(note);
            if !noted {
                problems.push(format!("{at}: `unsafe` without a SAFETY note: `{t}`"));
            }
        }
    }
    problems
}

/// Files that name any of `names` (in non-test code, comments aside):
/// under `dir` when `inside`, else outside every one of `dirs` — a
/// dependency kept to where it belongs.
pub fn check_names(
    sources: &[Source],
    src: &str,
    names: &[&str],
    dirs: &[&str],
    inside: bool,
    why: &str,
) -> Vec<String> {
    let mut problems = Vec::new();
    for s in sources.iter().filter(|s| !is_test_file(&s.rel)) {
        let under = dirs.iter().any(|d| s.rel.starts_with(d));
        if under != inside {
            continue;
        }
        for (i, line) in non_test(&s.text).lines().enumerate() {
            let t = line.trim_start();
            if t.starts_with("//") {
                continue;
            }
            if let Some(name) = names.iter().find(|n| t.contains(*n)) {
                problems.push(format!(
                    "{src}/{}:{}: names `{name}` ({why}): `{t}`",
                    s.rel.display(),
                    i + 1
                ));
            }
        }
    }
    problems
}

/// Files that do not open with a `//!` line.
pub fn check_docs(sources: &[Source], src: &str) -> Vec<String> {
    sources
        .iter()
        .filter(|s| !s.text.starts_with("//!"))
        .map(|s| {
            format!(
                "{src}/{}: the first line is not a `//!` doc line saying what the file holds",
                s.rel.display()
            )
        })
        .collect()
}

/// Lines of non-test code: every line above the file's test modules
/// (blank lines and comments included: they are read too).
pub fn code_lines(s: &Source) -> usize {
    if is_test_file(&s.rel) {
        return 0;
    }
    non_test(&s.text).lines().count()
}

/// Files whose non-test code is longer than `max` lines.
pub fn check_sizes(sources: &[Source], src: &str, max: usize) -> Vec<String> {
    sources
        .iter()
        .filter_map(|s| {
            let n = code_lines(s);
            (n > max).then(|| {
                format!(
                    "{src}/{}: {n} lines of non-test code, more than {max}: split it by concept",
                    s.rel.display()
                )
            })
        })
        .collect()
}

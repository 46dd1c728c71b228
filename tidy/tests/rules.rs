//! The tidy rules on small made-up crates: each rule finds what it is for
//! and names the file, line and path that break it.

use rlfleet_tidy::files::{check_docs, check_sizes};
use rlfleet_tidy::imports::{CrateGraph, Source, paths_in};
use rlfleet_tidy::layers::{check_cycles, check_layers, parse_layers};

fn crate_of(files: &[(&str, &str)]) -> Vec<Source> {
    files
        .iter()
        .map(|(rel, text)| Source {
            rel: rel.into(),
            text: text.to_string(),
        })
        .collect()
}

const LAYERS: &str = "intro\n\n```layers demo\nleaf other\nmid\ntop\n```\n";

#[test]
fn use_trees_expand_to_one_path_per_leaf() {
    let paths: Vec<String> = paths_in("use crate::{a::X, b::{c::Y, Z}};\nlet v = super::d::f();")
        .into_iter()
        .map(|(_, p)| p.join("::"))
        .collect();
    assert_eq!(
        paths,
        [
            "crate::a::X",
            "crate::b::c::Y",
            "crate::b::Z",
            "super::d::f"
        ]
    );
    // `$crate::` in a macro and `pub(crate)` are not paths to a module.
    assert!(paths_in("$crate::x::y; pub(crate) fn f() {}").is_empty());
}

#[test]
fn an_upward_import_is_named_with_its_file_and_line() {
    let sources = crate_of(&[
        (
            "lib.rs",
            "//! root\npub mod leaf; pub mod other; pub mod mid; pub mod top;",
        ),
        ("leaf.rs", "//! leaf\nuse std::fmt;\n"),
        ("other.rs", "//! other\n"),
        ("mid.rs", "//! mid\nuse crate::leaf::Thing;\n"),
        (
            "top/mod.rs",
            "//! top\nmod inner;\nuse crate::{mid::M, leaf};\n",
        ),
        ("top/inner.rs", "//! inner\nuse super::super::mid::N;\n"),
    ]);
    let layers = &parse_layers(LAYERS)[0];
    assert_eq!(layers.krate, "demo");
    let graph = CrateGraph::build(&sources);
    assert_eq!(
        check_layers(&graph, layers, "demo/src"),
        Vec::<String>::new()
    );

    // The deliberate upward import, and one between peers.
    let mut bad = sources.clone();
    bad[1].text.push_str("\nfn f() { crate::top::go() }\n");
    bad[2].text.push_str("use crate::leaf::L;\n");
    let problems = check_layers(&CrateGraph::build(&bad), layers, "demo/src");
    assert_eq!(
        problems,
        [
            "demo: `leaf` imports `top`, a higher layer: demo/src/leaf.rs:4 `crate::top::go`",
            "demo: `other` imports `leaf`, its peer: demo/src/other.rs:2 `crate::leaf::L`",
        ]
    );
}

#[test]
fn a_module_outside_the_layers_is_named() {
    let sources = crate_of(&[
        ("lib.rs", "//! root\n"),
        ("leaf.rs", "//! leaf\n"),
        ("stray.rs", "//! stray\n"),
    ]);
    let problems = check_layers(&CrateGraph::build(&sources), &parse_layers(LAYERS)[0], "d");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("module `stray` is in no layer"))
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("name `mid`, which is not a module"))
    );
}

#[test]
fn cycles_are_found_at_every_depth() {
    let sources = crate_of(&[
        ("lib.rs", "//! root\n"),
        ("a/mod.rs", "//! a\nmod p; mod q;\n"),
        ("a/p.rs", "//! p\nuse super::q::Q;\n"),
        (
            "a/q.rs",
            "//! q\nuse crate::a::p::P;\n#[cfg(test)]\nmod tests { use crate::b::B; }\n",
        ),
        ("b.rs", "//! b\n"),
    ]);
    let graph = CrateGraph::build(&sources);
    let problems = check_cycles(&graph, "demo", "demo/src");
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("demo: an import cycle of 2 modules: a::p, a::q"));
    assert!(problems[0].contains("a::q -> a::p: demo/src/a/q.rs:2 `crate::a::p::P`"));
    // Test modules are left out: `a::q`'s test does not tie `a` to `b`.
    assert!(graph.edges(1).is_empty());
}

#[test]
fn files_open_with_a_doc_line_and_keep_the_budget() {
    let long = format!(
        "//! long\n{}#[cfg(test)]\nmod tests {{\n{}}}\n",
        "fn f() {}\n".repeat(5),
        "\n".repeat(50)
    );
    let sources = crate_of(&[("a.rs", "fn main() {}\n"), ("b.rs", &long)]);
    assert_eq!(
        check_docs(&sources, "c"),
        ["c/a.rs: the first line is not a `//!` doc line saying what the file holds"]
    );
    // Six lines of code; the test module does not count.
    assert!(check_sizes(&sources, "c", 6).is_empty());
    assert_eq!(
        check_sizes(&sources, "c", 5),
        ["c/b.rs: 6 lines of non-test code, more than 5: split it by concept"]
    );
}

#[test]
fn code_after_the_test_module_is_named() {
    let text = "//! a\nfn f() {}\n\n#[cfg(test)]\nmod tests {\n    fn g() {}\n}\n\n#[cfg(test)]\n/// more\nmod more {}\n\n/// hidden\nfn h() {}\n";
    let sources = crate_of(&[("a.rs", text)]);
    assert_eq!(
        rlfleet_tidy::files::check_tests_last(&sources, "c"),
        ["c/a.rs:14: code after the test modules (move it above the first `#[cfg(test)]`)"]
    );
}

#[test]
fn behaviour_in_a_plain_data_folder_is_named() {
    let sources = crate_of(&[
        (
            "wire/messages/a.rs",
            "//! a\n#[derive(Debug)]\npub struct A {\n    pub x: u32,\n}\n",
        ),
        (
            "wire/messages/b.rs",
            "//! b\nimpl B {\n    pub fn f(&self) {}\n}\n",
        ),
        ("wire/names.rs", "//! names\nimpl A {}\n"),
    ]);
    let problems = rlfleet_tidy::files::check_plain_data(&sources, "c", "wire/messages");
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].starts_with("c/wire/messages/b.rs:2: behaviour in `wire/messages`"));
}

#[test]
fn a_test_module_declaration_does_not_hide_the_rest_of_a_file() {
    let text = "//! m\nmod a;\n#[cfg(test)]\nmod tests;\nmod b;\nuse crate::top::X;\n";
    assert_eq!(rlfleet_tidy::imports::non_test(text), text);
    let inline = "//! m\nuse crate::a::A;\n#[cfg(test)]\n#[allow(dead_code)]\nmod tests {\n    use crate::b::B;\n}\n";
    assert_eq!(
        rlfleet_tidy::imports::non_test(inline),
        "//! m\nuse crate::a::A;\n"
    );
}

#[test]
fn a_clock_read_outside_the_driver_is_named() {
    let sources = crate_of(&[
        ("w/mod.rs", "//! driver\nlet now = Instant::now();\n"),
        (
            "w/family.rs",
            "//! family\nfn work(now: Instant) {\n    let t = started.elapsed();\n}\n#[cfg(test)]\nmod tests {\n    fn t() { Instant::now(); }\n}\n",
        ),
    ]);
    assert_eq!(
        rlfleet_tidy::files::check_no_clock(&sources, "c", "w", &["w/mod.rs"]),
        [
            "c/w/family.rs:3: reads the clock in `w`, where time is passed in: `let t = started.elapsed();`"
        ]
    );
}

#[test]
fn a_file_touched_outside_the_driver_is_named() {
    let sources = crate_of(&[
        ("w/mod.rs", "//! driver\nlet f = std::fs::read(p)?;\n"),
        (
            "w/book.rs",
            "//! book\n// std::fs is not for here\nfn row(out: &mut RunOutput) {}\n#[cfg(test)]\nmod tests {\n    fn t() { std::fs::write(p, b\"x\"); }\n}\n",
        ),
    ]);
    assert_eq!(
        rlfleet_tidy::files::check_no_files(&sources, "c", "w", &["w/mod.rs"]),
        [
            "c/w/book.rs:3: touches files in `w`, where the driver performs what is written: `fn row(out: &mut RunOutput) {}`"
        ]
    );
}

#[test]
fn a_native_dependency_that_is_not_optional_is_named() {
    let manifest = "[package]\nname = \"x\"\n\n[dependencies]\nserde.workspace = true\npyo3 = { workspace = true, optional = true }\nmpi.workspace = true\n\n[build-dependencies]\ntch = \"1\"\n";
    assert_eq!(
        rlfleet_tidy::manifest::check_native_optional(manifest, "x"),
        ["x/Cargo.toml: `mpi` links a native library and is not optional (`mpi.workspace = true`)"]
    );
}

#[test]
fn unsafe_is_named_outside_its_files_or_without_a_safety_note() {
    let sources = crate_of(&[
        (
            "ffi.rs",
            "//! ffi\n// SAFETY: the pointer is valid for len.\nlet x = unsafe { f() };\nlet y = unsafe { g() };\n",
        ),
        ("other.rs", "//! other\nunsafe fn h() {}\n"),
    ]);
    let problems = rlfleet_tidy::files::check_unsafe(&sources, "c", &["ffi.rs"]);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].starts_with("c/ffi.rs:4: `unsafe` without a SAFETY note"));
    assert!(problems[1].starts_with("c/other.rs:2: `unsafe` outside the files"));
}

#[test]
fn a_name_kept_to_its_place_is_named_elsewhere() {
    let sources = crate_of(&[
        (
            "transport/quic.rs",
            "//! t\nuse crate::vocab::Intake;\nuse crate::hub::Hub;\n",
        ),
        ("mpi_run.rs", "//! m\nuse rlfleet_shared::mpi::Layout;\n"),
        (
            "workflows/x.rs",
            "//! w\n// quinn:: is never named here\nlet m = rlfleet_shared::mpi::Layout::new();\n",
        ),
    ]);
    let hub = rlfleet_tidy::files::check_names(
        &sources,
        "c",
        &["crate::hub"],
        &["transport"],
        true,
        "why",
    );
    assert_eq!(
        hub,
        ["c/transport/quic.rs:3: names `crate::hub` (why): `use crate::hub::Hub;`"]
    );
    let mpi =
        rlfleet_tidy::files::check_names(&sources, "c", &["mpi::"], &["mpi_run.rs"], false, "why");
    assert_eq!(mpi.len(), 1, "{mpi:?}");
    assert!(mpi[0].starts_with("c/workflows/x.rs:3:"));
    let manifest = "[dependencies]\ntch.workspace = true\nort = \"2\"\n";
    assert_eq!(
        rlfleet_tidy::manifest::check_absent(manifest, "a", &["tch"], "why"),
        ["a/Cargo.toml: depends on `tch` (why)"]
    );
    // A feature of the same name is not a dependency; a dev-dependency is.
    let manifest = "[features]\nmpi = [\"b/mpi\"]\n[dev-dependencies]\nmpi = \"0.8\"\n";
    assert_eq!(
        rlfleet_tidy::manifest::check_absent(manifest, "a", &["mpi"], "why"),
        ["a/Cargo.toml: depends on `mpi` (why)"]
    );
}

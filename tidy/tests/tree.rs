//! The workspace itself passes the tidy checks (run by `cargo test` and
//! so by `scripts/test.sh`).

#[test]
fn the_workspace_is_tidy() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let problems = rlfleet_tidy::check_workspace(&root).expect("read the workspace");
    assert!(
        problems.is_empty(),
        "{} tidy problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

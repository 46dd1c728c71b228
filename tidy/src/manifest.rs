//! Manifest rules: `rlfleet-shared`, which actor processes link, pulls in
//! no native library unless a feature asks for it — every dependency that
//! links one (libpython, MPI, libtorch, ONNX Runtime) is optional there —
//! and a crate does not depend on what it must never load (the actor on
//! libtorch).

/// Crates that link a native library.
pub const NATIVE: [&str; 5] = ["pyo3", "mpi", "tch", "torch-sys", "ort"];

/// Dependencies of a `Cargo.toml` (its `[dependencies]` table) that link a
/// native library without being optional.
pub fn check_native_optional(manifest: &str, krate: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_deps = t == "[dependencies]";
            continue;
        }
        if !in_deps {
            continue;
        }
        let Some((name, spec)) = t.split_once('=') else {
            continue;
        };
        let name = name.trim().trim_end_matches(".workspace");
        if NATIVE.contains(&name) && !spec.contains("optional = true") {
            problems.push(format!(
                "{krate}/Cargo.toml: `{name}` links a native library and is not optional (`{t}`)"
            ));
        }
    }
    problems
}

/// Dependencies of a `Cargo.toml` (any table but `[features]`, whose keys
/// are feature names) that it must not have.
pub fn check_absent(manifest: &str, krate: &str, forbidden: &[&str], why: &str) -> Vec<String> {
    let mut in_features = false;
    manifest
        .lines()
        .filter_map(|line| {
            let t = line.trim();
            if t.starts_with('[') {
                in_features = t == "[features]";
                return None;
            }
            if in_features {
                return None;
            }
            let (name, _) = t.split_once('=')?;
            let name = name.trim().trim_end_matches(".workspace");
            forbidden
                .contains(&name)
                .then(|| format!("{krate}/Cargo.toml: depends on `{name}` ({why})"))
        })
        .collect()
}

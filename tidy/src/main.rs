//! `rlfleet-tidy [ROOT]`: prints every problem the tidy checks find in the
//! workspace at ROOT (default: this crate's workspace) and exits 1 if
//! there is any.

fn main() {
    let root = std::env::args_os()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    match rlfleet_tidy::check_workspace(&root) {
        Ok(problems) if problems.is_empty() => println!("tidy: no problem"),
        Ok(problems) => {
            for p in &problems {
                println!("{p}");
            }
            println!("tidy: {} problems", problems.len());
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("tidy: cannot read the workspace at {}: {e}", root.display());
            std::process::exit(2);
        }
    }
}

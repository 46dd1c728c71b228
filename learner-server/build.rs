//! Build script shared by every package that links libtorch (learner-server,
//! the integration tests, the benchmarks): tch's rpath does not reach our
//! binaries, so point them at the libtorch they were built against. With the
//! `cuda` feature, also force-link libtorch_cuda (see SETUP.md) so that CUDA
//! is found at run time.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    if let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,-ltorch,--as-needed");
    }
}

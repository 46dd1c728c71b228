//! Build script shared by every package whose binaries or tests link
//! libtorch or libpython (the shared crate, learner-server, actor-client, the
//! integration tests, the benchmarks): neither tch's nor pyo3's rpath reaches
//! our binaries, so point them at the libtorch and the libpython they were
//! built against. With the `cuda` feature, also force-link libtorch_cuda
//! (a library nothing calls by name, which the linker would otherwise
//! drop) so that CUDA is found at run time. (rlfleet-learning's own script,
//! `crates/learning/build.rs`, runs this and compiles its C++ shim.)

pub fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    if let Ok(dir) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    pyo3_build_config::add_libpython_rpath_link_args();
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,-ltorch,--as-needed");
    }
}

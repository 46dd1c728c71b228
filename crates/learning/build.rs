//! rlfleet-learning's build script: the one every package that links
//! libtorch runs (`build.rs`: rpaths, CUDA), then ATen's fused Adam shim
//! (`src/agents/fused_adam.cpp`, which tch 0.24 does not expose), compiled
//! against the same libtorch with the flags torch-sys uses for its own C++
//! (C++17, the wheel's C++11 ABI).

#[path = "../../learner-server/build.rs"]
mod common;

fn main() {
    common::main();
    let src = "src/agents/fused_adam.cpp";
    println!("cargo:rerun-if-changed={src}");
    let lib = std::env::var("DEP_TCH_LIBTORCH_LIB")
        .expect("torch-sys tells where libtorch is (DEP_TCH_LIBTORCH_LIB)");
    let include = std::path::Path::new(&lib)
        .parent()
        .expect("libtorch's lib dir has a parent")
        .join("include");
    cc::Build::new()
        .cpp(true)
        .file(src)
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        .flag("-DGLOG_USE_GLOG_EXPORT")
        .warnings(false)
        .compile("rlfleet_fused_adam");
}

//! The process's ONNX Runtime environment: the library loaded at run time
//! from `ORT_DYLIB_PATH`, once, for every session the actor builds.

use std::sync::OnceLock;

/// The process's ONNX Runtime environment (loaded once).
pub fn environment() -> anyhow::Result<&'static ort::environment::Environment> {
    static ENV: OnceLock<Result<ort::environment::Environment, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let path = std::env::var_os("ORT_DYLIB_PATH").ok_or_else(|| {
            "ORT_DYLIB_PATH is not set: point it at libonnxruntime.so 1.31 or newer \
             (`. scripts/setup.sh` exports it)"
                .to_string()
        })?;
        let builder = ort::init_from(&path)
            .map_err(|e| format!("cannot load ONNX Runtime from {path:?}: {e}"))?;
        builder
            .build()
            .map_err(|e| format!("cannot start ONNX Runtime from {path:?}: {e}"))
    })
    .as_ref()
    .map_err(|e| anyhow::anyhow!("{e}"))
}

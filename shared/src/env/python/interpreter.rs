//! The process's one embedded interpreter: which venv it imports packages
//! from, and the bridge module (`bridge.py`) loaded into it once.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;
use std::ffi::CString;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The venv chosen for this process (`None`: the interpreter's own
/// site-packages only).
static VENV: OnceLock<Option<PathBuf>> = OnceLock::new();
static BRIDGE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The environment variable that names the venv (the binaries' `--python-venv`
/// flag sets the same thing).
pub const VENV_VAR: &str = "RLFLEET_PYTHON_VENV";

/// Chooses the venv whose packages Python envs import, before the first
/// Python env is built; `None` keeps the default (see [`venv`]). Returns
/// false when the interpreter already chose one.
pub fn set_venv(path: Option<PathBuf>) -> bool {
    match path {
        Some(p) => VENV.set(Some(p)).is_ok(),
        None => true,
    }
}

/// Python envs use the packages of the interpreter this process runs in
/// (an extension module loaded by a user's Python), never a venv's: its
/// `sys.path` is left alone. Returns false when a venv was already chosen.
pub fn use_host_interpreter() -> bool {
    VENV.set(None).is_ok()
}

/// The venv in use: the one set with [`set_venv`], else `$RLFLEET_PYTHON_VENV`,
/// else `$VIRTUAL_ENV`, else the set-up's cached venv
/// (`~/.cache/rlfleet/venv-gymnasium-*`, newest name) when it exists.
pub fn venv() -> Option<PathBuf> {
    VENV.get_or_init(|| {
        let from_env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        from_env(VENV_VAR)
            .or_else(|| from_env("VIRTUAL_ENV"))
            .or_else(cached_venv)
    })
    .clone()
}

/// The venv `scripts/setup.sh` makes, if this machine has one.
fn cached_venv() -> Option<PathBuf> {
    let cache = std::env::var_os("RLFLEET_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/rlfleet")))?;
    let mut found: Vec<PathBuf> = std::fs::read_dir(cache)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("venv-gymnasium-"))
                && p.join(".complete").exists()
        })
        .collect();
    found.sort();
    found.pop()
}

/// The bridge module, loading it (and pointing `sys.path` at the venv) on
/// first use.
pub(super) fn bridge(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    BRIDGE
        .get_or_try_init(py, || {
            let sys = py.import("sys")?;
            if sys
                .getattr("argv")
                .map(|a| a.len().unwrap_or(0))
                .unwrap_or(0)
                == 0
            {
                sys.setattr("argv", vec!["rlfleet"])?;
            }
            if let Some(venv) = venv() {
                let (major, minor): (u32, u32) = (
                    sys.getattr("version_info")?.get_item(0)?.extract()?,
                    sys.getattr("version_info")?.get_item(1)?.extract()?,
                );
                let site = venv.join(format!("lib/python{major}.{minor}/site-packages"));
                if !site.is_dir() {
                    return Err(pyo3::exceptions::PyRuntimeError::new_err(format!(
                        "venv `{}` has no {} (is it a venv of Python {major}.{minor}, the \
                         Python rlfleet embeds?)",
                        venv.display(),
                        site.display()
                    )));
                }
                py.import("site")?
                    .call_method1("addsitedir", (site.to_string_lossy().into_owned(),))?;
            }
            let code = CString::new(include_str!("bridge.py")).expect("no NUL in bridge.py");
            let module = PyModule::from_code(py, &code, c"rlfleet_bridge.py", c"rlfleet_bridge")?;
            Ok(module.unbind())
        })
        .map(|m| m.bind(py))
}

/// An exception as one line: type, message and the last traceback frame.
pub(super) fn describe_err(py: Python<'_>, err: &PyErr) -> String {
    let formatted = bridge(py).and_then(|b| {
        b.call_method1("fault", (err.value(py), err.traceback(py)))?
            .extract::<String>()
    });
    formatted.unwrap_or_else(|_| err.to_string())
}

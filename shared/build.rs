//! rlfleet-shared's build script: with the `python` feature its test
//! binaries link libpython, whose rpath pyo3 does not set; point them at
//! the libpython pyo3 was built against.

fn main() {
    #[cfg(feature = "python")]
    pyo3_build_config::add_libpython_rpath_link_args();
}

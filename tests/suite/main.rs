//! rlfleet's cross-crate integration suite: one test binary, a module per
//! area. Helpers are in the `rlfleet_tests` library (`tests/support/`).

mod actor_faults;
mod atari;
mod bad_config;
mod bad_input;
mod bad_links;
mod checkpoint_failures;
mod cnn_models;
mod conformance;
mod control_api;
mod csv_files;
mod daemon_accounting;
mod device_share;
mod durable_runs;
#[cfg(feature = "mpi")]
mod env_groups;
mod env_parity;
mod frame_stacks;
mod gpu_check;
mod inproc;
mod install;
mod learn;
mod local_actor_failures;
mod many_runs;
#[cfg(feature = "mpi")]
mod mpi_ranks;
mod onnx_parity;
mod onnx_recurrent;
mod openapi_conformance;
mod ort_actors;
mod python_client;
mod python_envs;
mod resume;
mod run_results;
mod silent_actors;
#[cfg(feature = "mpi")]
mod slurm_job;
mod stop_reasons;
mod studies;
mod systemd_notify;
mod systemd_units;
mod tensorboard;
mod value_watch;
mod vtrace_reference;

//! Where tensors live: CUDA when libtorch sees a GPU, else the CPU.

use tch::Device;

/// Picks CUDA device 0 when available, else the CPU, and logs the choice.
/// Also pins libtorch's intra-op threads: the networks here are small, and
/// on a small machine extra threads cost more than they give.
pub fn select(intra_op_threads: i32) -> Device {
    tch::set_num_threads(intra_op_threads);
    let device = current();
    match device {
        Device::Cuda(i) => tracing::info!(
            device = i,
            gpus = tch::Cuda::device_count(),
            "training on CUDA (libtorch found a GPU)"
        ),
        _ => tracing::info!(
            threads = intra_op_threads,
            "training on CPU (libtorch found no GPU)"
        ),
    }
    device
}

/// The device [`select`] picks, without logging or touching thread
/// settings (for parts that follow the learner's choice).
pub fn current() -> Device {
    if tch::Cuda::is_available() {
        Device::Cuda(0)
    } else {
        Device::Cpu
    }
}

//! Where tensors live: CUDA when libtorch sees a GPU, else the CPU; and
//! host memory seen as tensors (uploads, downloads) or a CPU tensor's
//! values seen as a slice, for update rules that make one pass over them
//! on the CPU (where a chain of libtorch element-wise ops makes one pass
//! each).

use tch::kind::Element;
use tch::{Device, Kind, Tensor};

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

/// Whether [`select`] picks a GPU.
pub fn is_gpu() -> bool {
    current().is_cuda()
}

/// `data` as a tensor of `shape` on `device`. To a GPU the values cross
/// straight from the slice, as `torch.from_numpy(a).to("cuda")` does, with
/// no host copy first (`Tensor::from_slice` makes one: a megabyte of
/// frames per batch); on the CPU the tensor owns a copy.
pub fn upload<T: Element>(data: &[T], shape: &[i64], device: Device) -> Tensor {
    assert_eq!(
        shape.iter().product::<i64>(),
        data.len() as i64,
        "upload: {} values for shape {shape:?}",
        data.len()
    );
    if device == Device::Cpu || data.is_empty() {
        return Tensor::from_slice(data).view(shape).to_device(device);
    }
    // SAFETY: the view reads `data`, which outlives it: a copy from host
    // memory that is not `non_blocking` has finished when `to_device`
    // returns, and the view is dropped here.
    #[allow(unsafe_code)]
    let view = unsafe { Tensor::from_blob(data.as_ptr().cast(), shape, &[], T::KIND, Device::Cpu) };
    view.to_device(device)
}

/// Copies `t` (any device; converted to `T`'s kind) into `out`, which
/// holds exactly its values: from a GPU straight into `out`, with no host
/// tensor between.
pub fn download_into<T: Element>(t: &Tensor, out: &mut [T]) {
    assert_eq!(t.numel(), out.len(), "download: sizes differ");
    let t = t.to_kind(T::KIND);
    if out.is_empty() {
        return;
    }
    let (n, at) = (out.len() as i64, out.as_mut_ptr().cast());
    // SAFETY: the view writes `out`, which outlives it and is borrowed
    // mutably for the call; `copy_` to host memory without `non_blocking`
    // has finished when it returns, and the view is dropped here.
    #[allow(unsafe_code)]
    let mut view = unsafe { Tensor::from_blob(at, &[n], &[], T::KIND, Device::Cpu) };
    tch::no_grad(|| view.copy_(&t.reshape([n])));
}

/// Copies a flat f32 tensor out to host memory.
pub(crate) fn to_vec(t: &Tensor) -> Vec<f32> {
    let mut v = vec![0f32; t.numel()];
    download_into(t, &mut v);
    v
}

/// Overwrites a tensor in place with host data of the same length.
pub(crate) fn copy_into(dst: &mut Tensor, data: &[f32]) {
    let src = upload(data, &[data.len() as i64], dst.device());
    tch::no_grad(|| dst.copy_(&src));
}

/// Whether `t`'s values are one run of `kind` values in host memory.
fn on_host(t: &Tensor, kind: Kind) -> bool {
    t.device() == Device::Cpu && t.kind() == kind && t.is_contiguous() && t.numel() > 0
}

/// `t`'s values, read-only, if they are one run of f32 in host memory
/// (`None` for a tensor on a device, of another kind or strided).
pub(crate) fn host_values(t: &Tensor) -> Option<&[f32]> {
    host_slice(t)
}

/// `t`'s values, read-only, if they are one run of `T` in host memory.
#[allow(unsafe_code)]
pub(crate) fn host_slice<T: Element>(t: &Tensor) -> Option<&[T]> {
    if !on_host(t, T::KIND) {
        return None;
    }
    // SAFETY: a contiguous CPU tensor of `T`'s kind with at least one
    // element holds `numel()` values of `T` from `data_ptr()` (non-null),
    // which live while `t` is borrowed; nothing writes them meanwhile (this
    // process updates its tensors from one thread, and `&Tensor` is only
    // read here).
    Some(unsafe { std::slice::from_raw_parts(t.data_ptr() as *const T, t.numel()) })
}

/// `t`'s values, to update in place (as [`host_values`]).
#[allow(unsafe_code)]
pub(crate) fn host_values_mut(t: &mut Tensor) -> Option<&mut [f32]> {
    if !on_host(t, Kind::Float) {
        return None;
    }
    // SAFETY: as in `host_values`; the `&mut Tensor` is the one handle this
    // update writes through, and callers pass tensors of distinct storage
    // (checked by `distinct`).
    Some(unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, t.numel()) })
}

/// No two of `tensors` share their first value's address (a slice of one
/// and a mutable slice of another must not overlap).
pub(crate) fn distinct(tensors: &[&Tensor]) -> bool {
    let ptrs: Vec<usize> = tensors.iter().map(|t| t.data_ptr() as usize).collect();
    ptrs.iter()
        .enumerate()
        .all(|(i, p)| !ptrs[i + 1..].contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Kind;

    /// Values cross to the learner's device and back unchanged, a strided
    /// tensor comes out in row-major order, and bytes come back as values.
    #[test]
    fn uploads_and_downloads_keep_values_and_order() {
        let device = current();
        let values: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
        let t = upload(&values, &[3, 4], device);
        assert_eq!((t.size(), t.device()), (vec![3, 4], device));
        let mut back = vec![0f32; 12];
        download_into(&t, &mut back);
        assert_eq!(back, values);
        download_into(&t.tr(), &mut back);
        let v = &values;
        let column_first: Vec<f32> = (0..4)
            .flat_map(|c| (0..3).map(move |r| v[r * 4 + c]))
            .collect();
        assert_eq!(back, column_first);
        let bytes: Vec<u8> = (0..6).map(|i| 250 + i).collect();
        let b = upload(&bytes, &[2, 3], device);
        assert_eq!(b.kind(), Kind::Uint8);
        let mut as_values = vec![0f32; 6];
        download_into(&b, &mut as_values);
        assert_eq!(as_values, [250.0, 251.0, 252.0, 253.0, 254.0, 255.0]);
    }

    #[test]
    #[should_panic(expected = "5 values for shape [2, 3]")]
    fn an_upload_of_the_wrong_size_is_refused() {
        let _ = upload(&[1f32; 5], &[2, 3], Device::Cpu);
    }

    #[test]
    fn host_tensors_give_their_values_and_others_none() {
        let mut t = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
        assert_eq!(host_values(&t), Some(&[1.0f32, 2.0, 3.0][..]));
        host_values_mut(&mut t).unwrap()[1] = 5.0;
        assert_eq!(Vec::<f32>::try_from(&t).unwrap(), [1.0, 5.0, 3.0]);
        let strided = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0])
            .view([2, 2])
            .tr();
        assert!(host_values(&strided).is_none(), "a transposed view");
        assert!(host_values(&Tensor::from_slice(&[1.0f64])).is_none(), "f64");
        assert!(
            host_values(&Tensor::from_slice::<f32>(&[])).is_none(),
            "empty"
        );
        let u = t.shallow_clone();
        assert!(!distinct(&[&t, &u]), "two handles of one storage");
        assert!(distinct(&[&t, &strided]));
    }
}

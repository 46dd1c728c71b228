//! The values of a contiguous f32 tensor in host memory as a slice, for
//! update rules that make one pass over them on the CPU (where a chain of
//! libtorch element-wise ops makes one pass each); `None` for a tensor on
//! a device, of another kind or strided, which the tensor ops handle.

use tch::{Device, Kind, Tensor};

/// Whether `t`'s values are one run of f32 in host memory.
fn on_host(t: &Tensor) -> bool {
    t.device() == Device::Cpu && t.kind() == Kind::Float && t.is_contiguous() && t.numel() > 0
}

/// `t`'s values, read-only.
#[allow(unsafe_code)]
pub(crate) fn values(t: &Tensor) -> Option<&[f32]> {
    // SAFETY: a contiguous CPU f32 tensor with at least one element holds
    // `numel()` f32 values from `data_ptr()` (non-null), which live while
    // `t` is borrowed; nothing writes them meanwhile (this process updates
    // its tensors from one thread, and `&Tensor` is only read here).
    on_host(t).then(|| unsafe { std::slice::from_raw_parts(t.data_ptr() as *const f32, t.numel()) })
}

/// `t`'s values, to update in place.
#[allow(unsafe_code)]
pub(crate) fn values_mut(t: &mut Tensor) -> Option<&mut [f32]> {
    // SAFETY: as in `values`; the `&mut Tensor` is the one handle this
    // update writes through, and callers pass tensors of distinct storage
    // (checked by `distinct`).
    on_host(t)
        .then(|| unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, t.numel()) })
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

    #[test]
    fn host_tensors_give_their_values_and_others_none() {
        let mut t = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
        assert_eq!(values(&t), Some(&[1.0f32, 2.0, 3.0][..]));
        values_mut(&mut t).unwrap()[1] = 5.0;
        assert_eq!(Vec::<f32>::try_from(&t).unwrap(), [1.0, 5.0, 3.0]);
        let strided = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0])
            .view([2, 2])
            .tr();
        assert!(values(&strided).is_none(), "a transposed view");
        assert!(values(&Tensor::from_slice(&[1.0f64])).is_none(), "f64");
        assert!(values(&Tensor::from_slice::<f32>(&[])).is_none(), "empty");
        let u = t.shallow_clone();
        assert!(!distinct(&[&t, &u]), "two handles of one storage");
        assert!(distinct(&[&t, &strided]));
    }
}

//! NumPy 2 scalar arithmetic, where Gymnasium's results depend on it.
//!
//! Under NEP 50 a Python float is "weak": it takes the dtype of a NumPy
//! operand it meets (float32 arithmetic and float32 comparisons), while two
//! NumPy scalars promote to the wider dtype. Environments whose Python source
//! mixes float32 state with Python floats use [`Num`] to compute exactly what
//! NumPy computes.

use std::cmp::Ordering;
use std::ops::{Add, Mul, Sub};

/// A scalar as Python sees it: a `numpy.float32`, a `numpy.float64` or a
/// Python `float`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    F32(f32),
    F64(f64),
    Py(f64),
}

use Num::{F32, F64, Py};

impl Num {
    pub(crate) fn value(self) -> f64 {
        match self {
            F32(v) => v as f64,
            F64(v) | Py(v) => v,
        }
    }

    /// Applies `op` in the dtype NumPy 2 picks for `self (op) other`.
    fn binary(self, other: Num, f32_op: fn(f32, f32) -> f32, f64_op: fn(f64, f64) -> f64) -> Num {
        match (self, other) {
            (F32(a), F32(b)) => F32(f32_op(a, b)),
            (F32(a), Py(b)) => F32(f32_op(a, b as f32)),
            (Py(a), F32(b)) => F32(f32_op(a as f32, b)),
            (Py(a), Py(b)) => Py(f64_op(a, b)),
            (a, b) => F64(f64_op(a.value(), b.value())),
        }
    }

    /// Python's `<`, `>`, `==` between the two, in NumPy's dtype.
    pub(crate) fn cmp(self, other: Num) -> Option<Ordering> {
        match (self, other) {
            (F32(a), F32(b)) => a.partial_cmp(&b),
            (F32(a), Py(b)) => a.partial_cmp(&(b as f32)),
            (Py(a), F32(b)) => (a as f32).partial_cmp(&b),
            (a, b) => a.value().partial_cmp(&b.value()),
        }
    }

    pub(crate) fn gt(self, other: Num) -> bool {
        self.cmp(other) == Some(Ordering::Greater)
    }

    pub(crate) fn lt(self, other: Num) -> bool {
        self.cmp(other) == Some(Ordering::Less)
    }

    pub(crate) fn ge(self, other: Num) -> bool {
        matches!(self.cmp(other), Some(Ordering::Greater | Ordering::Equal))
    }

    pub(crate) fn eq_num(self, other: Num) -> bool {
        self.cmp(other) == Some(Ordering::Equal)
    }
}

impl Add for Num {
    type Output = Num;
    fn add(self, o: Num) -> Num {
        self.binary(o, |a, b| a + b, |a, b| a + b)
    }
}

impl Sub for Num {
    type Output = Num;
    fn sub(self, o: Num) -> Num {
        self.binary(o, |a, b| a - b, |a, b| a - b)
    }
}

impl Mul for Num {
    type Output = Num;
    fn mul(self, o: Num) -> Num {
        self.binary(o, |a, b| a * b, |a, b| a * b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_python_floats_take_the_float32_dtype() {
        assert_eq!(F32(0.1) + Py(0.2), F32(0.1f32 + 0.2f32));
        assert!(F32(0.07).eq_num(Py(0.07)));
        assert!(!F32(0.07).gt(Py(0.07)));
        assert_eq!(F64(1.0) + F32(0.5), F64(1.5));
        assert_eq!(Py(1.0) * Py(3.0), Py(3.0));
    }
}

//! [`Collective`]: the ranks one environment instance spans, as the env
//! sees them — its rank, the group's size and the few collectives a
//! partitioned simulation needs. An env built outside an MPI env group
//! gets [`Solo`], a group of one; under `actor-client mpi` every rank of a
//! group gets the MPI one (`rlfleet_shared::mpi::EnvComm`), a
//! communicator of its own per env instance.

/// A group of ranks that step one environment together.
pub trait Collective: Send + std::fmt::Debug {
    /// This rank's index in the group (0: the leader, the rank that acts).
    fn rank(&self) -> usize;
    /// Ranks in the group.
    fn size(&self) -> usize;
    /// Every rank's `mine` (the same length on every rank), in rank order.
    fn all_gather(&self, mine: &[f64]) -> Vec<f64>;
    /// Element-wise sums over the ranks, in place.
    fn all_sum(&self, values: &mut [f64]);
    /// The communicator's Fortran handle (`MPI_Comm_c2f`): how a Python
    /// env receives it as an mpi4py communicator. `None`: no MPI.
    fn fortran_handle(&self) -> Option<i32>;
}

/// A group of one rank: the collectives are identities.
#[derive(Debug, Clone, Copy, Default)]
pub struct Solo;

impl Collective for Solo {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn all_gather(&self, mine: &[f64]) -> Vec<f64> {
        mine.to_vec()
    }

    fn all_sum(&self, _values: &mut [f64]) {}

    fn fortran_handle(&self) -> Option<i32> {
        None
    }
}

/// The cells `[start, end)` of `n` that rank `rank` of `size` holds: equal
/// shares, the first `n % size` ranks one cell more.
pub fn share(n: usize, rank: usize, size: usize) -> std::ops::Range<usize> {
    let (base, extra) = (n / size, n % size);
    let start = rank * base + rank.min(extra);
    start..start + base + usize::from(rank < extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_cell_once() {
        for size in 1..=7 {
            let mut next = 0;
            for rank in 0..size {
                let r = share(30, rank, size);
                assert_eq!(r.start, next);
                next = r.end;
            }
            assert_eq!(next, 30);
        }
        assert_eq!(share(64, 1, 4), 16..32);
    }
}

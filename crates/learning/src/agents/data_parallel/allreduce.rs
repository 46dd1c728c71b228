//! [`AllreduceMean`]: the gradient average every data-parallel learner
//! applies before its optimizer step (`MPI_Allreduce` over the learners'
//! own communicator).

use crate::agents::GradientReduce;
use rlfleet_shared::mpi::Group;
use rlfleet_shared::mpi::rsmpi::collective::SystemOperation;
use rlfleet_shared::mpi::rsmpi::traits::{Communicator, CommunicatorCollectives};

/// Averages gradients over the learners' group.
#[derive(Debug)]
pub struct AllreduceMean {
    pub group: Group,
    sum: Vec<f32>,
}

impl AllreduceMean {
    pub fn new(group: Group) -> AllreduceMean {
        AllreduceMean {
            group,
            sum: Vec::new(),
        }
    }
}

impl GradientReduce for AllreduceMean {
    fn mean(&mut self, grad: &mut [f32]) {
        self.sum.resize(grad.len(), 0.0);
        self.group
            .0
            .all_reduce_into(&grad[..], &mut self.sum[..], SystemOperation::sum());
        let n = self.group.0.size() as f32;
        for (g, s) in grad.iter_mut().zip(&self.sum) {
            *g = s / n;
        }
    }
}

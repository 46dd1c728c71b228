//! [`KeptVersions`]: the published policy of IMPALA's recent versions, so
//! that an update computes the behaviour policy of steps acted by older
//! weights exactly.

use std::collections::VecDeque;
use tch::Tensor;

/// Published versions whose weights are kept for the steps they acted:
/// a step acted by an older one cannot be corrected and is dropped
/// (counted in [`super::Impala::uncorrectable`]).
const KEPT_VERSIONS: usize = 64;

/// The last [`KEPT_VERSIONS`] published versions' weights, oldest first.
#[derive(Debug, Default)]
pub(super) struct KeptVersions(VecDeque<(u64, Tensor)>);

impl KeptVersions {
    /// Keeps a copy of `policy` as `version` (replacing one of that
    /// version), dropping the oldest beyond the limit.
    pub fn keep(&mut self, version: u64, policy: &Tensor) {
        let w = tch::no_grad(|| policy.detach().copy());
        self.0.retain(|(v, _)| *v != version);
        self.0.push_back((version, w));
        while self.0.len() > KEPT_VERSIONS {
            self.0.pop_front();
        }
    }

    /// Only `policy` as `version` (what acted before is another run's).
    pub fn reset(&mut self, version: u64, policy: &Tensor) {
        self.0.clear();
        self.keep(version, policy);
    }

    pub fn weights_of(&self, version: u64) -> Option<&Tensor> {
        self.0
            .iter()
            .find_map(|(v, w)| (*v == version).then_some(w))
    }
}

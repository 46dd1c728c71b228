//! [`KeptVersions`]: the published policy of an agent's recent versions, so
//! that an update computes the behaviour policy of steps acted by older
//! weights exactly (IMPALA's V-trace, PPO's ratio).

use std::collections::{BTreeMap, VecDeque};
use tch::{Device, Tensor};

/// The last `limit` published versions' weights, oldest first.
#[derive(Debug)]
pub(super) struct KeptVersions {
    kept: VecDeque<(u64, Tensor)>,
    limit: usize,
}

impl KeptVersions {
    /// Keeps at most `limit` versions: a step acted by an older one
    /// cannot be corrected.
    pub fn new(limit: usize) -> KeptVersions {
        KeptVersions {
            kept: VecDeque::new(),
            limit: limit.max(1),
        }
    }

    /// Keeps a copy of `policy` as `version` (replacing one of that
    /// version), dropping the oldest beyond the limit.
    pub fn keep(&mut self, version: u64, policy: &Tensor) {
        let w = tch::no_grad(|| policy.detach().copy());
        self.kept.retain(|(v, _)| *v != version);
        self.kept.push_back((version, w));
        while self.kept.len() > self.limit {
            self.kept.pop_front();
        }
    }

    /// Only `policy` as `version` (what acted before is another run's).
    pub fn reset(&mut self, version: u64, policy: &Tensor) {
        self.kept.clear();
        self.keep(version, policy);
    }

    pub fn weights_of(&self, version: u64) -> Option<&Tensor> {
        self.kept
            .iter()
            .find_map(|(v, w)| (*v == version).then_some(w))
    }

    /// Per row, `logp(weights, rows)` (`[len(rows)]`, no gradient) under
    /// the weights of the version that acted it, `versions[row]`; rows of a
    /// version no longer kept under `fallback`'s weights when given, and
    /// it panics without one (checked before). Returns the values and how
    /// many rows took the fallback.
    pub fn logp_by_version(
        &self,
        versions: &[u64],
        device: Device,
        fallback: Option<&Tensor>,
        logp: impl Fn(&Tensor, &Tensor) -> Tensor,
    ) -> (Vec<f32>, usize) {
        let mut rows: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
        for (i, &v) in versions.iter().enumerate() {
            rows.entry(v).or_default().push(i as i64);
        }
        let mut out = vec![0f32; versions.len()];
        let mut fell_back = 0;
        for (v, rows) in rows {
            let w = match (self.weights_of(v), fallback) {
                (Some(w), _) => w,
                (None, Some(w)) => {
                    fell_back += rows.len();
                    w
                }
                (None, None) => panic!("version {v} is not kept (checked before)"),
            };
            let idx = Tensor::from_slice(&rows).to_device(device);
            let values = tch::no_grad(|| logp(w, &idx));
            let values = Vec::<f32>::try_from(&values).expect("f32 values");
            for (&i, l) in rows.iter().zip(values) {
                out[i as usize] = l;
            }
        }
        (out, fell_back)
    }
}

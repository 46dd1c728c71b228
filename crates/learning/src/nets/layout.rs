//! [`Order`]: where a [`FlatNet`]'s parts sit in its own flat tensors, and
//! the conversions between that order and the shared layout
//! (`rlfleet_shared::nets::NetShape`'s: what actors, checkpoints and ONNX
//! files hold).
//!
//! The two orders differ only for a network with a recurrent core: its own
//! tensors hold the core's parts first. cuDNN runs an LSTM on its weights
//! in place only when they fill one storage from its start, in ATen's
//! order (per layer `w_ih`, `w_hh`, `b_ih`, `b_hh`); anywhere else
//! libtorch (or the network itself) would copy them on every call. Every
//! other network keeps the shared order, and its conversions copy nothing.

use super::FlatNet;
use crate::device::{copy_into, to_vec};
use rlfleet_checkpoint::AgentState;
use std::borrow::Cow;
use tch::Tensor;

/// A network's parts in its own order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Order {
    /// Own part `i` is part `canon[i]` of the shared layout.
    pub canon: Vec<usize>,
    /// Per part, where it starts in the own order, where in the shared
    /// one, and its length; empty where the two orders agree.
    moves: Vec<(usize, usize, usize)>,
    /// Values the network has (a tensor may carry more after them, such as
    /// PPO's log standard deviations: they stay where they are).
    numel: usize,
}

impl Order {
    /// The parts of lengths `lens` (shared order), with the `core` range
    /// of them moved to the front.
    pub fn new(lens: &[usize], core: Option<std::ops::Range<usize>>) -> Order {
        let numel = lens.iter().sum();
        let Some(core) = core.filter(|c| c.start > 0) else {
            return Order {
                canon: (0..lens.len()).collect(),
                moves: Vec::new(),
                numel,
            };
        };
        let canon: Vec<usize> = core
            .clone()
            .chain((0..lens.len()).filter(|i| !core.contains(i)))
            .collect();
        let shared_starts: Vec<usize> = lens
            .iter()
            .scan(0, |at, &len| {
                let start = *at;
                *at += len;
                Some(start)
            })
            .collect();
        let mut own = 0;
        let moves = canon
            .iter()
            .map(|&j| {
                let m = (own, shared_starts[j], lens[j]);
                own += lens[j];
                m
            })
            .collect();
        Order {
            canon,
            moves,
            numel,
        }
    }

    /// Whether the own order is the shared one.
    pub fn is_shared(&self) -> bool {
        self.moves.is_empty()
    }

    /// One item per part, from the own order to the shared one.
    pub fn shared_from_own<T>(&self, own: Vec<T>) -> Vec<T> {
        let mut shared: Vec<Option<T>> = own.iter().map(|_| None).collect();
        for (item, &j) in own.into_iter().zip(&self.canon) {
            shared[j] = Some(item);
        }
        shared
            .into_iter()
            .map(|t| t.expect("one item per part"))
            .collect()
    }

    /// One item per part, from the shared order to the own one.
    pub fn own_from_shared<T>(&self, shared: Vec<T>) -> Vec<T> {
        let mut shared: Vec<Option<T>> = shared.into_iter().map(Some).collect();
        self.canon
            .iter()
            .map(|&j| shared[j].take().expect("one item per part"))
            .collect()
    }
}

impl FlatNet {
    /// Values in this network's own order (a host copy of its parameters,
    /// or of an optimizer moment over them), in the shared layout.
    pub fn to_shared(&self, own: Vec<f32>) -> Vec<f32> {
        if self.order.is_shared() || own.len() < self.order.numel {
            return own;
        }
        let mut shared = own.clone();
        for &(o, s, len) in &self.order.moves {
            shared[s..s + len].copy_from_slice(&own[o..o + len]);
        }
        shared
    }

    /// Values in the shared layout, in this network's own order. Values of
    /// the wrong count are handed back as they are, for the caller's check
    /// of the count to refuse.
    pub fn to_own<'a>(&self, shared: &'a [f32]) -> Cow<'a, [f32]> {
        if self.order.is_shared() || shared.len() < self.order.numel {
            return Cow::Borrowed(shared);
        }
        let mut own = shared.to_vec();
        for &(o, s, len) in &self.order.moves {
            own[o..o + len].copy_from_slice(&shared[s..s + len]);
        }
        Cow::Owned(own)
    }
}

impl FlatNet {
    /// Whether the network's own order is the shared layout (it has no
    /// recurrent core).
    pub fn in_shared_order(&self) -> bool {
        self.order.is_shared()
    }

    /// A host copy of `own` (parameters or an optimizer moment in this
    /// network's own order), in the shared layout.
    pub fn shared_values(&self, own: &Tensor) -> Vec<f32> {
        self.to_shared(to_vec(own))
    }

    /// `dst` (in this network's own order) overwritten with `shared`.
    pub fn load_shared(&self, dst: &mut Tensor, shared: &[f32]) {
        copy_into(dst, &self.to_own(shared));
    }

    /// A checkpoint's tensors `names` (this network's, in its own order)
    /// turned into the shared layout: checkpoints hold that one, whatever
    /// order the learner keeps.
    pub fn state_to_shared(&self, s: &mut AgentState, names: &[&str]) {
        for t in s
            .tensors
            .iter_mut()
            .filter(|t| names.contains(&t.name.as_str()))
        {
            t.data = self.to_shared(std::mem::take(&mut t.data));
        }
    }

    /// A checkpoint's tensors `names` (in the shared layout) in this
    /// network's own order.
    pub fn state_to_own<'a>(&self, s: &'a AgentState, names: &[&str]) -> Cow<'a, AgentState> {
        if self.order.is_shared() {
            return Cow::Borrowed(s);
        }
        let mut own = s.clone();
        for t in own
            .tensors
            .iter_mut()
            .filter(|t| names.contains(&t.name.as_str()))
        {
            t.data = self.to_own(&t.data).into_owned();
        }
        Cow::Owned(own)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlfleet_shared::nets::{Core, NetShape};

    /// Parts of 2, 3, 4, 5, 6 values with the middle three as the core:
    /// the core first, the rest after in their order, and back again.
    #[test]
    fn the_core_goes_first_and_comes_back() {
        let order = Order::new(&[2, 3, 4, 5, 6], Some(1..4));
        assert_eq!(order.canon, [1, 2, 3, 0, 4]);
        let own = order.own_from_shared(vec!['a', 'b', 'c', 'd', 'e']);
        assert_eq!(own, ['b', 'c', 'd', 'a', 'e']);
        assert_eq!(order.shared_from_own(own), ['a', 'b', 'c', 'd', 'e']);
        let shared: Vec<f32> = (0..20).map(|i| i as f32).collect();
        let net = FlatNet {
            order,
            ..FlatNet::new(1, &[], 1)
        };
        let own = net.to_own(&shared).into_owned();
        let want: Vec<f32> = [2..5, 5..9, 9..14, 0..2, 14..20]
            .into_iter()
            .flatten()
            .map(|i| i as f32)
            .collect();
        assert_eq!(own, want);
        assert_eq!(net.to_shared(own), shared);
        // A tail after the network's values stays put.
        let mut long = shared.clone();
        long.push(99.0);
        let own = net.to_own(&long).into_owned();
        assert_eq!(own[20], 99.0);
        assert_eq!(net.to_shared(own), long);
        // A wrong count is handed back for the caller to refuse.
        assert_eq!(net.to_own(&shared[..5]), &shared[..5]);
    }

    /// Networks without a core keep the shared order; with one, the core's
    /// weights open the own order.
    #[test]
    fn only_a_core_moves() {
        let plain = FlatNet::new(3, &[4], 2);
        assert!(plain.order.is_shared());
        let shape = NetShape::new(3, &[4], 2).with_core(Some(Core { size: 5, layers: 2 }));
        let net = FlatNet::from_shape(shape);
        assert!(!net.order.is_shared());
        // Hidden layer (2 parts), the core (8), the head (2).
        assert_eq!(net.order.canon, [2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 10, 11]);
        // The own order's first part is layer 0's w_ih, [4 * 5, 4].
        assert_eq!(net.parts[0], 20 * 4);
    }
}

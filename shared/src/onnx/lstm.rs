//! A recurrent core's step as ONNX nodes: per LSTM layer, the gates from
//! two `Gemm`s over the layer's input and its `h`, cut in PyTorch's order
//! (input, forget, cell, output), then the cell's update. The state is the
//! graph input `state` `[batch, state_len]` (per layer `h` then `c`) and
//! the output `state_out`, which a caller feeds back at the next step.

use super::graph::{Graph, attr_int};
use crate::nets::Core;

impl Graph {
    /// One step of `core` over `x` (`input` values per row), its
    /// parameters read from `params` at `offset` (moved past them);
    /// returns the top layer's `h` and writes `state_out`.
    pub(super) fn lstm_step(
        &mut self,
        core: &Core,
        x: &str,
        input: usize,
        offset: &mut i64,
    ) -> String {
        let h = core.size as i64;
        let mut x = x.to_string();
        let mut ends = Vec::with_capacity(2 * core.layers);
        for (l, p) in core.parts(input).chunks_exact(4).enumerate() {
            let l = l as i64;
            let mut take = |g: &mut Graph, len: usize, shape: Option<[i64; 2]>| {
                let flat = g.slice("params", *offset, *offset + len as i64, 0);
                *offset += len as i64;
                match shape {
                    Some(s) => {
                        let s = g.const_i64(&s);
                        g.node("Reshape", &[&flat, &s], vec![])
                    }
                    None => flat,
                }
            };
            let fan_in = p[0] as i64 / (4 * h);
            let w_ih = take(self, p[0], Some([4 * h, fan_in]));
            let w_hh = take(self, p[1], Some([4 * h, h]));
            let b_ih = take(self, p[2], None);
            let b_hh = take(self, p[3], None);
            let h_prev = self.slice("state", 2 * l * h, (2 * l + 1) * h, 1);
            let c_prev = self.slice("state", (2 * l + 1) * h, (2 * l + 2) * h, 1);
            let from_x = self.node("Gemm", &[&x, &w_ih, &b_ih], vec![attr_int("transB", 1)]);
            let from_h = self.node(
                "Gemm",
                &[&h_prev, &w_hh, &b_hh],
                vec![attr_int("transB", 1)],
            );
            let gates = self.node("Add", &[&from_x, &from_h], vec![]);
            let gate = |g: &mut Graph, k: i64, op: &str| {
                let z = g.slice(&gates, k * h, (k + 1) * h, 1);
                g.node(op, &[&z], vec![])
            };
            let i = gate(self, 0, "Sigmoid");
            let f = gate(self, 1, "Sigmoid");
            let cell = gate(self, 2, "Tanh");
            let o = gate(self, 3, "Sigmoid");
            let kept = self.node("Mul", &[&f, &c_prev], vec![]);
            let added = self.node("Mul", &[&i, &cell], vec![]);
            let c = self.node("Add", &[&kept, &added], vec![]);
            let squashed = self.node("Tanh", &[&c], vec![]);
            let h_new = self.node("Mul", &[&o, &squashed], vec![]);
            ends.push(h_new.clone());
            ends.push(c);
            x = h_new;
        }
        let ends: Vec<&str> = ends.iter().map(String::as_str).collect();
        self.node_to("Concat", &ends, "state_out", vec![attr_int("axis", 1)]);
        x
    }
}

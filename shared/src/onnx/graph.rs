//! The ONNX graph under construction: nodes, initializers and fresh
//! names; the convolutional torso's nodes; value infos and attributes as
//! protobuf messages.

use super::proto::Msg;
use super::{FLOAT, INT64};
use crate::nets::{ConvTorso, Op};

/// Nodes and initializers under construction.
#[derive(Debug, Default)]
pub(super) struct Graph {
    pub(super) nodes: Vec<Msg>,
    pub(super) inits: Vec<Msg>,
    names: usize,
}

impl Graph {
    pub(super) fn fresh(&mut self) -> String {
        self.names += 1;
        format!("t{}", self.names)
    }

    pub(super) fn node_to(&mut self, op: &str, inputs: &[&str], output: &str, attrs: Vec<Msg>) {
        let mut n = Msg::new();
        for i in inputs {
            n.str(1, i);
        }
        n.str(2, output)
            .str(3, &format!("{op}_{output}"))
            .str(4, op);
        for a in &attrs {
            n.msg(5, a);
        }
        self.nodes.push(n);
    }

    /// A node with a fresh output name, which it returns.
    pub(super) fn node(&mut self, op: &str, inputs: &[&str], attrs: Vec<Msg>) -> String {
        let out = self.fresh();
        self.node_to(op, inputs, &out, attrs);
        out
    }

    fn init(&mut self, name: &str, dims: &[i64], kind: i64, raw: Vec<u8>) {
        let mut t = Msg::new();
        t.ints(1, dims).int(2, kind).str(8, name).bytes(9, &raw);
        self.inits.push(t);
    }

    pub(super) fn init_f32(&mut self, name: &str, dims: &[i64], vals: &[f32]) {
        let raw = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.init(name, dims, FLOAT, raw);
    }

    pub(super) fn const_f32(&mut self, vals: &[f32]) -> String {
        let name = self.fresh();
        self.init_f32(&name, &[vals.len() as i64], vals);
        name
    }

    pub(super) fn const_i64(&mut self, vals: &[i64]) -> String {
        let name = self.fresh();
        let raw = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.init(&name, &[vals.len() as i64], INT64, raw);
        name
    }

    /// The convolutional torso over the input `obs`, reading its
    /// parameters from `params` at `offset` (moved past them); returns the
    /// flattened features.
    pub(super) fn torso(&mut self, torso: &ConvTorso, offset: &mut i64) -> String {
        let [c, h, w] = torso.input.map(|d| d as i64);
        let mut x = if torso.channels_last {
            let shape = self.const_i64(&[-1, h, w, c]);
            let img = self.node("Reshape", &["obs", &shape], vec![]);
            self.node("Transpose", &[&img], vec![attr_ints("perm", &[0, 3, 1, 2])])
        } else {
            let shape = self.const_i64(&[-1, c, h, w]);
            self.node("Reshape", &["obs", &shape], vec![])
        };
        if torso.bytes {
            let scale = self.const_f32(&[1.0 / 255.0]);
            x = self.node("Mul", &[&x, &scale], vec![]);
        }
        let mut convs = torso.convs().into_iter();
        let mut saved = Vec::new();
        for op in torso.ops() {
            x = match op {
                Op::Conv { .. } => {
                    let (w, stride, pad) = convs.next().expect("one per Conv op");
                    let [out, cin, k, _] = w.map(|d| d as i64);
                    let (stride, pad) = (stride as i64, pad as i64);
                    let n = out * cin * k * k;
                    let flat = self.slice("params", *offset, *offset + n, 0);
                    *offset += n;
                    let shape = self.const_i64(&[out, cin, k, k]);
                    let weight = self.node("Reshape", &[&flat, &shape], vec![]);
                    let bias = self.slice("params", *offset, *offset + out, 0);
                    *offset += out;
                    self.node(
                        "Conv",
                        &[&x, &weight, &bias],
                        vec![
                            attr_ints("kernel_shape", &[k, k]),
                            attr_ints("strides", &[stride, stride]),
                            attr_ints("pads", &[pad, pad, pad, pad]),
                        ],
                    )
                }
                Op::Relu => self.node("Relu", &[&x], vec![]),
                Op::MaxPool {
                    kernel,
                    stride,
                    pad,
                } => {
                    let (k, s, p) = (kernel as i64, stride as i64, pad as i64);
                    self.node(
                        "MaxPool",
                        &[&x],
                        vec![
                            attr_ints("kernel_shape", &[k, k]),
                            attr_ints("strides", &[s, s]),
                            attr_ints("pads", &[p, p, p, p]),
                        ],
                    )
                }
                Op::Save => {
                    saved.push(x.clone());
                    x
                }
                Op::AddSaved => {
                    let skip = saved.pop().expect("a Save before each AddSaved");
                    self.node("Add", &[&x, &skip], vec![])
                }
            };
        }
        self.node("Flatten", &[&x], vec![attr_int("axis", 1)])
    }

    /// `x[start..end]` along `axis`.
    pub(super) fn slice(&mut self, x: &str, start: i64, end: i64, axis: i64) -> String {
        let s = self.const_i64(&[start]);
        let e = self.const_i64(&[end]);
        let a = self.const_i64(&[axis]);
        self.node("Slice", &[x, &s, &e, &a], vec![])
    }
}

pub(super) enum Dim {
    Batch,
    Named(&'static str),
    Fixed(usize),
}

pub(super) fn value_info(name: &str, dims: &[Dim]) -> Msg {
    let mut shape = Msg::new();
    for d in dims {
        let mut dim = Msg::new();
        match d {
            Dim::Batch => dim.str(2, "batch"),
            Dim::Named(name) => dim.str(2, name),
            Dim::Fixed(n) => dim.int(1, *n as i64),
        };
        shape.msg(1, &dim);
    }
    let mut tensor = Msg::new();
    tensor.int(1, FLOAT).msg(2, &shape);
    let mut ty = Msg::new();
    ty.msg(1, &tensor);
    let mut vi = Msg::new();
    vi.str(1, name).msg(2, &ty);
    vi
}

pub(super) fn attr_int(name: &str, v: i64) -> Msg {
    let mut a = Msg::new();
    a.str(1, name).int(3, v).int(20, 2);
    a
}

pub(super) fn attr_ints(name: &str, vs: &[i64]) -> Msg {
    let mut a = Msg::new();
    a.str(1, name).ints(8, vs).int(20, 7);
    a
}

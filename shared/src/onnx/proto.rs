//! Just enough protocol-buffer encoding to write an ONNX `ModelProto`:
//! varints, length-delimited fields and packed repeated scalars (field
//! numbers as in onnx.proto).

/// A message being encoded.
#[derive(Debug, Default, Clone)]
pub struct Msg {
    pub buf: Vec<u8>,
}

fn varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

impl Msg {
    pub fn new() -> Msg {
        Msg::default()
    }

    fn key(&mut self, field: u32, wire: u8) {
        varint(&mut self.buf, (u64::from(field) << 3) | u64::from(wire));
    }

    /// An integer field (int32, int64 or enum; negative values take ten
    /// bytes, as protobuf does).
    pub fn int(&mut self, field: u32, v: i64) -> &mut Msg {
        self.key(field, 0);
        varint(&mut self.buf, v as u64);
        self
    }

    pub fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Msg {
        self.key(field, 2);
        varint(&mut self.buf, b.len() as u64);
        self.buf.extend_from_slice(b);
        self
    }

    pub fn str(&mut self, field: u32, s: &str) -> &mut Msg {
        self.bytes(field, s.as_bytes())
    }

    pub fn msg(&mut self, field: u32, m: &Msg) -> &mut Msg {
        self.bytes(field, &m.buf)
    }

    /// A packed repeated int64 field.
    pub fn ints(&mut self, field: u32, vs: &[i64]) -> &mut Msg {
        let mut packed = Vec::new();
        for &v in vs {
            varint(&mut packed, v as u64);
        }
        self.bytes(field, &packed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_protobuf() {
        let mut m = Msg::new();
        m.int(1, 150).str(2, "hi").ints(3, &[1, 300]);
        assert_eq!(
            m.buf,
            [
                0x08, 0x96, 0x01, // field 1 varint 150
                0x12, 2, b'h', b'i', // field 2 "hi"
                0x1a, 3, 1, 0xac, 0x02, // field 3 packed [1, 300]
            ]
        );
        let mut neg = Msg::new();
        neg.int(1, -1);
        assert_eq!(neg.buf.len(), 1 + 10);
    }
}

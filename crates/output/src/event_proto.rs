//! The TensorBoard events `syntaxdot-summary` does not write, encoded by
//! hand: a text summary (the text plugin) and a session's
//! hyperparameters (the hparams plugin), each framed as a TFRecord.

/// A hyperparameter's value, as the hparams plugin stores it
/// (`google.protobuf.Value`).
#[derive(Debug, Clone, PartialEq)]
pub enum HParam {
    Number(f64),
    Text(String),
    Bool(bool),
}

/// Protobuf's base-128 varint.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field (wire type 2).
fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    varint(out, u64::from(field) << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A varint field (wire type 0).
fn varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    varint(out, u64::from(field) << 3);
    varint(out, v);
}

/// A double field (wire type 1).
fn double_field(out: &mut Vec<u8>, field: u32, v: f64) {
    varint(out, u64::from(field) << 3 | 1);
    out.extend_from_slice(&v.to_le_bytes());
}

/// `SummaryMetadata { plugin_data { plugin_name, content } }`.
fn plugin_metadata(plugin: &str, content: &[u8]) -> Vec<u8> {
    let mut data = Vec::new();
    bytes_field(&mut data, 1, plugin.as_bytes());
    if !content.is_empty() {
        bytes_field(&mut data, 2, content);
    }
    let mut meta = Vec::new();
    bytes_field(&mut meta, 1, &data);
    meta
}

/// `Event { wall_time, step, summary { value } }`.
fn event(wall_time: f64, step: i64, value: &[u8]) -> Vec<u8> {
    let mut summary = Vec::new();
    bytes_field(&mut summary, 1, value);
    let mut ev = Vec::new();
    double_field(&mut ev, 1, wall_time);
    varint_field(&mut ev, 2, step as u64);
    bytes_field(&mut ev, 5, &summary);
    ev
}

/// An event with `text` under `tag` (the text plugin renders it as
/// Markdown).
pub fn text_event(wall_time: f64, step: i64, tag: &str, text: &str) -> Vec<u8> {
    // TensorProto { dtype: DT_STRING (7), tensor_shape: {} (a scalar),
    // string_val: [text] }.
    let mut tensor = Vec::new();
    varint_field(&mut tensor, 1, 7);
    bytes_field(&mut tensor, 2, &[]);
    bytes_field(&mut tensor, 8, text.as_bytes());
    let mut value = Vec::new();
    bytes_field(&mut value, 1, tag.as_bytes());
    bytes_field(&mut value, 9, &plugin_metadata("text", &[]));
    bytes_field(&mut value, 8, &tensor);
    event(wall_time, step, &value)
}

/// The hparams plugin's `session_start_info` event: the run's
/// hyperparameters, by name.
pub fn hparams_event(wall_time: f64, hparams: &[(String, HParam)]) -> Vec<u8> {
    let mut start = Vec::new();
    for (name, v) in hparams {
        // map<string, google.protobuf.Value>: entries { key, value }.
        let mut pv = Vec::new();
        match v {
            HParam::Number(x) => double_field(&mut pv, 2, *x),
            HParam::Text(s) => bytes_field(&mut pv, 3, s.as_bytes()),
            HParam::Bool(b) => varint_field(&mut pv, 4, u64::from(*b)),
        }
        let mut entry = Vec::new();
        bytes_field(&mut entry, 1, name.as_bytes());
        bytes_field(&mut entry, 2, &pv);
        bytes_field(&mut start, 1, &entry);
    }
    double_field(&mut start, 5, wall_time);
    // HParamsPluginData { version: 0, session_start_info }.
    let mut content = Vec::new();
    bytes_field(&mut content, 3, &start);
    let mut value = Vec::new();
    bytes_field(&mut value, 1, b"_hparams_/session_start_info");
    bytes_field(&mut value, 9, &plugin_metadata("hparams", &content));
    event(wall_time, 0, &value)
}

/// CRC-32C (Castagnoli), bit by bit: a few records per run.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// TFRecord's masked CRC.
fn masked(data: &[u8]) -> u32 {
    let crc = crc32c(data);
    (crc.rotate_right(15)).wrapping_add(0xa282_ead8)
}

/// `data` framed as a TFRecord: its length, the length's masked CRC, the
/// data, the data's masked CRC.
pub fn record(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked(data).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn varints_encode_as_protobuf_does() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xAC, 0x02]);
    }
}

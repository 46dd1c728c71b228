//! Framing: a little-endian `u32` length, then that many bytes of one
//! archived [`Message`]. Frames above the receiver's maximum are refused
//! before any of their body is read; bodies are validated (rkyv's checked
//! access) before they are deserialised.

use super::{Message, WeightsMsg};
use rkyv::rancor;
use rkyv::util::AlignedVec;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {len} bytes is larger than the maximum of {max} bytes")]
    TooLarge { len: u32, max: u32 },
    #[error("frame failed validation: {0}")]
    Invalid(String),
    #[error("stream ended in the middle of a frame")]
    Truncated,
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// Archives a message into a frame (length prefix included).
pub fn encode(msg: &Message) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(msg, &mut out);
    out
}

/// Archives a message into `out` (cleared first), length prefix included.
pub fn encode_into(msg: &Message, out: &mut Vec<u8>) {
    let body = rkyv::to_bytes::<rancor::Error>(msg).expect("messages always archive");
    out.clear();
    out.reserve(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
}

/// Validates and deserialises one frame body (without its length prefix).
pub fn decode(body: &[u8]) -> Result<Message, FrameError> {
    let mut aligned = AlignedVec::<16>::with_capacity(body.len());
    aligned.extend_from_slice(body);
    decode_aligned(&aligned)
}

fn decode_aligned(body: &AlignedVec<16>) -> Result<Message, FrameError> {
    let archived = rkyv::access::<super::messages::ArchivedMessage, rancor::Error>(body)
        .map_err(|e| FrameError::Invalid(e.to_string()))?;
    rkyv::deserialize::<Message, rancor::Error>(archived)
        .map_err(|e| FrameError::Invalid(e.to_string()))
}

/// The buffer's first size for a frame's body (it then doubles as bytes
/// arrive, up to the frame's declared length).
const FIRST_READ: usize = 64 * 1024;

/// Reads one message. `Ok(None)` when the stream ended cleanly between
/// frames. `buf` is reused between calls. A weights frame and the message
/// after it come back as one message (the weights put back in it). Returns
/// the message and its size on the wire.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max_bytes: u32,
    buf: &mut AlignedVec<16>,
) -> Result<Option<(Message, usize)>, FrameError> {
    let mut rejoin = super::WeightsRejoin::default();
    let mut total = 0;
    loop {
        let Some((msg, n)) = read_one(r, max_bytes, buf).await? else {
            // A stream may end between messages, not after a weights frame.
            return if total == 0 {
                Ok(None)
            } else {
                Err(FrameError::Truncated)
            };
        };
        total += n;
        if let Some(whole) = rejoin.join(msg)? {
            return Ok(Some((whole, total)));
        }
    }
}

/// Reads the one weights frame of a stream that carries nothing else (an
/// `Ack`'s weights over QUIC).
pub async fn read_weights<R: AsyncRead + Unpin>(
    r: &mut R,
    max_bytes: u32,
) -> Result<WeightsMsg, FrameError> {
    match read_one(r, max_bytes, &mut AlignedVec::new()).await? {
        Some((Message::Weights(w), _)) => Ok(w),
        Some((other, _)) => Err(FrameError::Invalid(format!(
            "a {} frame on a weights stream",
            other.kind()
        ))),
        None => Err(FrameError::Truncated),
    }
}

/// Reads one frame.
async fn read_one<R: AsyncRead + Unpin>(
    r: &mut R,
    max_bytes: u32,
    buf: &mut AlignedVec<16>,
) -> Result<Option<(Message, usize)>, FrameError> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        let n = r.read(&mut len[got..]).await?;
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(FrameError::Truncated)
            };
        }
        got += n;
    }
    let len = u32::from_le_bytes(len);
    if len > max_bytes {
        return Err(FrameError::TooLarge {
            len,
            max: max_bytes,
        });
    }
    // The buffer grows with the bytes that arrive, not with the length a
    // peer declares: a frame announced and never sent pins no memory.
    // (It doubles as it fills: at most twice what arrived.)
    buf.clear();
    let len = len as usize;
    let mut filled = 0;
    while filled < len {
        if buf.len() == filled {
            let grow = filled.max(FIRST_READ).min(len - filled);
            buf.resize(filled + grow, 0);
        }
        let n = r.read(&mut buf[filled..]).await?;
        if n == 0 {
            return Err(FrameError::Truncated);
        }
        filled += n;
    }
    Ok(Some((decode_aligned(buf)?, 4 + len)))
}

/// Writes one message as a frame; returns the bytes written.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    msg: &Message,
    scratch: &mut Vec<u8>,
) -> std::io::Result<usize> {
    encode_into(msg, scratch);
    w.write_all(scratch).await?;
    Ok(scratch.len())
}

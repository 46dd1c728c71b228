//! [`FramedStream`]: one bidirectional QUIC stream carrying frames, with
//! byte counts for the transport metrics.

use rkyv::util::AlignedVec;
use rlfleet_shared::wire::{self, FrameError, Message};

/// Both halves of a bidirectional stream and the buffers its frames reuse.
#[derive(Debug)]
pub struct FramedStream {
    pub send: quinn::SendStream,
    pub recv: quinn::RecvStream,
    max_frame: u32,
    rbuf: AlignedVec<16>,
    wbuf: Vec<u8>,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

impl FramedStream {
    pub fn new(send: quinn::SendStream, recv: quinn::RecvStream, max_frame: u32) -> Self {
        FramedStream {
            send,
            recv,
            max_frame,
            rbuf: AlignedVec::new(),
            wbuf: Vec::new(),
            bytes_in: 0,
            bytes_out: 0,
        }
    }

    /// The largest frame `recv` accepts from now on.
    pub fn set_max_frame(&mut self, max_frame: u32) {
        self.max_frame = max_frame;
    }

    /// Reads the next message; `Ok(None)` when the peer finished the stream.
    pub async fn recv(&mut self) -> Result<Option<Message>, FrameError> {
        match wire::read_frame(&mut self.recv, self.max_frame, &mut self.rbuf).await? {
            Some((m, n)) => {
                self.bytes_in += n as u64;
                Ok(Some(m))
            }
            None => Ok(None),
        }
    }

    /// Sends one message; returns its size on the wire.
    pub async fn send(&mut self, msg: &Message) -> std::io::Result<usize> {
        let n = wire::write_frame(&mut self.send, msg, &mut self.wbuf).await?;
        self.bytes_out += n as u64;
        Ok(n)
    }

    /// The sending half, and the receiving half as a [`FrameReader`] (for
    /// a task that reads while the other half writes).
    pub fn split(self) -> (quinn::SendStream, FrameReader) {
        let reader = FrameReader {
            recv: self.recv,
            max_frame: self.max_frame,
            rbuf: self.rbuf,
        };
        (self.send, reader)
    }

    /// Sends a frame already encoded (length prefix included).
    pub async fn send_frame(&mut self, frame: &[u8]) -> std::io::Result<()> {
        self.send
            .write_all(frame)
            .await
            .map_err(std::io::Error::from)?;
        self.bytes_out += frame.len() as u64;
        Ok(())
    }

    /// Sends raw bytes (tests and benchmarks use it for malformed frames).
    pub async fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.send
            .write_all(bytes)
            .await
            .map_err(std::io::Error::from)
    }
}

/// The receiving half of a [`FramedStream`].
#[derive(Debug)]
pub struct FrameReader {
    recv: quinn::RecvStream,
    max_frame: u32,
    rbuf: AlignedVec<16>,
}

impl FrameReader {
    /// Reads the next message; `Ok(None)` when the peer finished the
    /// stream.
    pub async fn recv(&mut self) -> Result<Option<Message>, FrameError> {
        let got = wire::read_frame(&mut self.recv, self.max_frame, &mut self.rbuf).await?;
        Ok(got.map(|(m, _)| m))
    }
}

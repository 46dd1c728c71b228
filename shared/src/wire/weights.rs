//! Weights in a frame of their own. An `Ack` or `Welcome` that carries
//! weights goes over QUIC and MPI as a [`Message::Weights`] frame and then
//! the message without them: [`WeightsFrames`] encodes the weights frame
//! once per published version, and every actor's session sends the same
//! bytes (7 MB for DQN-Nature's network, once, instead of once per actor).
//! [`super::read_frame`] (a stream) and [`WeightsRejoin`] (frames handed
//! over one by one) put the weights back into the message after them, so
//! a reader sees the message whole.

use super::{FrameError, Message, WeightsMsg, encode};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Takes the weights out of an `Ack` or `Welcome` (`None` for any other
/// message, or one without weights).
pub fn take_weights(msg: &mut Message) -> Option<WeightsMsg> {
    match msg {
        Message::Ack(a) => a.weights.take(),
        Message::Welcome(w) => w.weights.take(),
        _ => None,
    }
}

/// The weights an `Ack` or `Welcome` carries.
pub fn weights_of(msg: &Message) -> Option<&WeightsMsg> {
    match msg {
        Message::Ack(a) => a.weights.as_ref(),
        Message::Welcome(w) => w.weights.as_ref(),
        _ => None,
    }
}

/// Puts weights read from a weights frame into the message after it: an
/// `Ack` or `Welcome` without weights of its own, else an error naming it.
pub fn attach_weights(msg: &mut Message, weights: WeightsMsg) -> Result<(), FrameError> {
    let slot = match msg {
        Message::Ack(a) => &mut a.weights,
        Message::Welcome(w) => &mut w.weights,
        other => {
            return Err(FrameError::Invalid(format!(
                "a weights frame before a {} frame (only an ack or a welcome takes weights)",
                other.kind()
            )));
        }
    };
    if slot.is_some() {
        return Err(FrameError::Invalid(
            "a weights frame before a message that carries weights of its own".into(),
        ));
    }
    *slot = Some(weights);
    Ok(())
}

/// The encoded weights frame of the latest version sent, shared by every
/// session of a learner.
#[derive(Debug, Default)]
pub struct WeightsFrames {
    last: Mutex<Option<(WeightsMsg, Arc<Vec<u8>>)>>,
    encoded: AtomicU64,
}

impl WeightsFrames {
    /// The frame of `weights` (length prefix included), and whether this
    /// call encoded it: encoded the first time these weights (this copy,
    /// this version) are asked for.
    pub fn frame(&self, weights: &WeightsMsg) -> (Arc<Vec<u8>>, bool) {
        let mut last = self.last.lock().expect("weights frames lock");
        if let Some((held, frame)) = &*last
            && held.version == weights.version
            && Arc::ptr_eq(&held.data, &weights.data)
        {
            return (frame.clone(), false);
        }
        let frame = Arc::new(encode(&Message::Weights(weights.clone())));
        self.encoded.fetch_add(1, Ordering::Relaxed);
        *last = Some((weights.clone(), frame.clone()));
        (frame, true)
    }

    /// Weights frames encoded so far.
    pub fn encoded(&self) -> u64 {
        self.encoded.load(Ordering::Relaxed)
    }
}

/// Joins each weights frame to the message after it, for a transport that
/// hands over frames one at a time (an MPI rank's receives).
#[derive(Debug, Default)]
pub struct WeightsRejoin {
    held: Option<WeightsMsg>,
}

impl WeightsRejoin {
    /// The message whole, or `None` when `msg` is a weights frame (held
    /// for the message after it). An error when two weights frames come in
    /// a row or the message after one takes no weights.
    pub fn join(&mut self, mut msg: Message) -> Result<Option<Message>, FrameError> {
        if let Message::Weights(w) = msg {
            if self.held.is_some() {
                return Err(FrameError::Invalid(
                    "two weights frames in a row (each goes before the message it belongs to)"
                        .into(),
                ));
            }
            self.held = Some(w);
            return Ok(None);
        }
        if let Some(w) = self.held.take() {
            attach_weights(&mut msg, w)?;
        }
        Ok(Some(msg))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Ack, read_frame};

    fn ack(weights: Option<WeightsMsg>) -> Message {
        Message::Ack(Ack {
            seq: 3,
            duplicate: false,
            weights,
            weights_apart: None,
            epsilon: 0.1,
            starts: vec![],
            full: false,
        })
    }

    /// One encoding per version, shared; a reader gets the ack whole.
    #[test]
    fn a_version_is_encoded_once_and_read_back_into_its_message() {
        let frames = WeightsFrames::default();
        let w = WeightsMsg {
            version: 4,
            data: vec![0.5f32; 1000].into(),
        };
        let (a, first) = frames.frame(&w);
        let (b, again) = frames.frame(&w.clone());
        assert!(first && !again && Arc::ptr_eq(&a, &b));
        assert_eq!(frames.encoded(), 1);
        let next = WeightsMsg {
            version: 5,
            data: vec![0.25f32; 1000].into(),
        };
        frames.frame(&next);
        assert_eq!(frames.encoded(), 2);

        let mut msg = ack(Some(w.clone()));
        let taken = take_weights(&mut msg).unwrap();
        let mut bytes = a.as_ref().clone();
        bytes.extend_from_slice(&encode(&msg));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let mut buf = rkyv::util::AlignedVec::new();
        let (got, n) = rt
            .block_on(read_frame(&mut &bytes[..], 1 << 24, &mut buf))
            .unwrap()
            .unwrap();
        assert_eq!(got, ack(Some(taken)));
        assert_eq!(n, bytes.len());
        // Weights before anything but an ack or a welcome are refused.
        let mut stop = encode(&Message::Weights(w));
        stop.extend_from_slice(&encode(&Message::Stop(crate::wire::Stop {
            reason: "done".into(),
            shutdown: false,
        })));
        let err = rt
            .block_on(read_frame(&mut &stop[..], 1 << 24, &mut buf))
            .unwrap_err();
        assert!(err.to_string().contains("before a stop frame"), "{err}");
    }

    /// Frames one by one: a weights frame is held and joined to the ack
    /// after it; two in a row, or one before a stop, are refused.
    #[test]
    fn frames_handed_over_one_by_one_are_joined_like_a_stream() {
        let w = WeightsMsg {
            version: 2,
            data: vec![1.5f32; 10].into(),
        };
        let mut rejoin = WeightsRejoin::default();
        let mut msg = ack(Some(w.clone()));
        let taken = take_weights(&mut msg).unwrap();
        assert_eq!(weights_of(&msg), None);
        assert_eq!(rejoin.join(Message::Weights(taken)).unwrap(), None);
        let whole = rejoin.join(msg).unwrap().unwrap();
        assert_eq!(weights_of(&whole), Some(&w));
        assert_eq!(
            rejoin.join(ack(None)).unwrap(),
            Some(ack(None)),
            "nothing held"
        );
        rejoin.join(Message::Weights(w.clone())).unwrap();
        let twice = rejoin.join(Message::Weights(w.clone())).unwrap_err();
        assert!(twice.to_string().contains("two weights frames"), "{twice}");
        let mut rejoin = WeightsRejoin::default();
        rejoin.join(Message::Weights(w)).unwrap();
        let stop = Message::Stop(crate::wire::Stop {
            reason: "done".into(),
            shutdown: false,
        });
        let err = rejoin.join(stop).unwrap_err();
        assert!(err.to_string().contains("before a stop frame"), "{err}");
    }
}

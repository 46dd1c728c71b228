//! Frames off the wire: any bytes as a frame body decode to a message or an
//! error, never a panic; a message that decodes encodes to a frame that
//! decodes and encodes again to the same bytes (bytes, not values: NaN is
//! not equal to itself); and the stream reader, given the bytes as a
//! stream under a small frame limit, ends in a message, a clean end or an
//! error.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rlfleet_shared::wire::{decode, encode, read_frame};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Polls a future that never waits (a reader over a byte slice) to its end.
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(msg) = decode(data) {
        let frame = encode(&msg);
        let again = decode(&frame[4..]).expect("an encoded message decodes");
        assert_eq!(encode(&again), frame);
    }
    let mut stream = data;
    let mut buf = rkyv::util::AlignedVec::<16>::new();
    for _ in 0..4 {
        match ready(read_frame(&mut stream, 64 * 1024, &mut buf)) {
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => break,
        }
    }
});

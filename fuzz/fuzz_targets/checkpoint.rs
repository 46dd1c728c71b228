//! Checkpoint files: any bytes give a checkpoint or a format error naming the
//! file, never a panic; a checkpoint that loads saves to a file that loads
//! back to the same checkpoint (compared by its `Debug` text: NaN is
//! allowed in a tensor and is not equal to itself).

#![no_main]

use rlfleet_checkpoint::{Checkpoint, CheckpointError};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.safetensors");
    match Checkpoint::from_bytes(data, path) {
        Ok(ck) => {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let file = dir.path().join("checkpoint.safetensors");
            ck.save(&file).expect("a loaded checkpoint saves");
            let again = Checkpoint::load(&file).expect("a saved checkpoint loads");
            assert_eq!(format!("{again:?}"), format!("{ck:?}"));
        }
        Err(CheckpointError::Format { path: p, .. }) => assert_eq!(p, path),
        Err(e) => panic!("bytes in memory gave a non-format error: {e}"),
    }
});

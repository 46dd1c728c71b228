//! Round trips and refusals of the frame codec.

use super::*;

fn experience() -> Message {
    Message::Experience(Experience {
        actor_id: "a-1".into(),
        session_id: 7,
        seq: 3,
        policy_version: 11,
        steps: {
            let mut s = Steps::default();
            s.begin(0, 4, 0, &[0.5; 4], false);
            s.step(&[1.0], 1.0, &[0.25; 4], false);
            s.step(&[0.0], 1.0, &[0.75; 4], false);
            s.end(true);
            s.into()
        },
        finished: vec![EpisodeResult {
            episode: 4,
            env: 0,
            ret: 2.0,
            length: 2,
        }],
        faults: vec![EnvFaultReport {
            episode: 5,
            env: 1,
            error: "ValueError: boom (at env.py:3 in step)".into(),
        }],
        idle_envs: vec![0],
        last: false,
    })
}

fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn frames_round_trip_through_a_stream() {
    let msgs = vec![
        experience(),
        Message::Stop(Stop {
            reason: "done".into(),
            shutdown: false,
        }),
        ErrorCode::BadShape.message("obs has 3 values, expected 4"),
    ];
    let mut wire = Vec::new();
    for m in &msgs {
        wire.extend(encode(m));
    }
    let got = block_on(async {
        let mut r = &wire[..];
        let mut buf = rkyv::util::AlignedVec::new();
        let mut out = Vec::new();
        while let Some((m, size)) = read_frame(&mut r, 1 << 20, &mut buf).await.unwrap() {
            assert_eq!(size, encode(&m).len());
            out.push(m);
        }
        out
    });
    assert_eq!(got, msgs);
}

#[test]
fn oversized_frames_are_refused_before_their_body() {
    let frame = encode(&experience());
    let err = block_on(async {
        let mut r = &frame[..];
        let mut buf = rkyv::util::AlignedVec::new();
        read_frame(&mut r, 16, &mut buf).await.unwrap_err()
    });
    assert!(matches!(err, FrameError::TooLarge { max: 16, .. }), "{err}");
}

#[test]
fn garbage_fails_validation() {
    let mut frame = encode(&experience());
    // Corrupt the root object at the end of the archive: its tag, relative
    // pointers and lengths (as large as the largest message's).
    let n = frame.len();
    let root = size_of::<rkyv::Archived<Message>>();
    for b in &mut frame[n - root..] {
        *b = 0xff;
    }
    let err = decode(&frame[4..]).unwrap_err();
    assert!(matches!(err, FrameError::Invalid(_)), "{err}");
    // A truncated frame is reported as such.
    let whole = encode(&experience());
    let err = block_on(async {
        let mut r = &whole[..whole.len() - 3];
        let mut buf = rkyv::util::AlignedVec::new();
        read_frame(&mut r, 1 << 20, &mut buf).await.unwrap_err()
    });
    assert!(matches!(err, FrameError::Truncated), "{err}");
}

#[test]
fn each_observation_travels_once_and_bytes_take_a_quarter() {
    let frame = |as_u8: bool, steps: usize| {
        let mut t = Steps::default();
        t.begin(0, 3, 0, &[255.0; 64], as_u8);
        for k in 0..steps {
            t.step(&[1.0], 0.5, &[k as f32; 64], as_u8);
        }
        let mut o = vec![0f32; 64];
        t.obs_into(steps, &mut o);
        assert_eq!(o, vec![(steps - 1) as f32; 64], "exact either way");
        let e = match experience() {
            Message::Experience(e) => Experience {
                steps: t.into(),
                ..e
            },
            _ => unreachable!(),
        };
        encode(&Message::Experience(e)).len()
    };
    let (f, b) = (frame(false, 16), frame(true, 16));
    // 17 observations of 64 values: 4,352 bytes as f32, 1,088 as bytes.
    assert!(f - b >= 3 * 17 * 64 - 64, "{f} vs {b}");
    // One more step adds one observation, not two.
    let grown = frame(true, 17) - b;
    assert!((64..64 + 16).contains(&grown), "{grown}");
}

//! Round trips and refusals of the frame codec.

use super::*;

fn experience() -> Message {
    Message::Experience(Experience {
        actor_id: "a-1".into(),
        session_id: 7,
        seq: 3,
        policy_version: 11,
        transitions: Transitions {
            obs: vec![0.5; 8],
            actions: vec![1.0, 0.0],
            rewards: vec![1.0, 1.0],
            next_obs: vec![0.25; 8],
            obs_u8: vec![],
            next_obs_u8: vec![],
            terminated: vec![0, 1],
            episode: vec![4, 4],
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

#[test]
fn dropping_an_episode_removes_its_rows_from_every_column() {
    let mut t = Transitions {
        obs: vec![0.0, 0.1, 1.0, 1.1, 2.0, 2.1],
        actions: vec![0.0, 1.0, 2.0],
        rewards: vec![0.0, 1.0, 2.0],
        next_obs: vec![0.5, 0.6, 1.5, 1.6, 2.5, 2.6],
        obs_u8: vec![],
        next_obs_u8: vec![],
        terminated: vec![0, 0, 1],
        episode: vec![7, 8, 7],
    };
    t.drop_episode(7, 2, 1);
    assert_eq!(t.obs, vec![1.0, 1.1]);
    assert_eq!(t.next_obs, vec![1.5, 1.6]);
    assert_eq!((t.actions, t.rewards), (vec![1.0], vec![1.0]));
    assert_eq!((t.terminated, t.episode), (vec![0], vec![8]));
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
fn uint8_observations_take_a_quarter_of_the_frame() {
    let (obs, next) = (vec![255.0f32; 64], vec![17.0f32; 64]);
    let frame = |as_u8: bool| {
        let mut t = Transitions::default();
        for _ in 0..16 {
            t.push_obs(&obs, &next, as_u8);
            t.actions.push(1.0);
            t.rewards.push(0.5);
            t.terminated.push(0);
            t.episode.push(3);
        }
        let (mut o, mut n) = (vec![0f32; 64], vec![0f32; 64]);
        t.obs_row(15, &mut o, &mut n);
        assert_eq!((o, n), (obs.clone(), next.clone()), "exact either way");
        let e = match experience() {
            Message::Experience(e) => Experience {
                transitions: t,
                ..e
            },
            _ => unreachable!(),
        };
        encode(&Message::Experience(e)).len()
    };
    let (f, b) = (frame(false), frame(true));
    // 2 * 16 * 64 observation values: 8 KiB as f32, 2 KiB as bytes.
    assert!(f - b >= 3 * 2 * 16 * 64 - 64, "{f} vs {b}");
}

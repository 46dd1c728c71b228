//! Lanes: one actor process's envs split over several connections, each an
//! actor of its own (id `ID/k`), played in turn on the thread that steps
//! envs. A `seed` actor waits for the learner's actions after every step of
//! its envs; with two lanes, one lane's envs step while the other's request
//! is on its way and being answered (SEED RL's actors run several env loops
//! per core for the same reason).

use super::{ActorOptions, ActorReport, run};
use tokio_util::sync::CancellationToken;

/// Each of `lanes` lanes' options: the envs split as evenly as they go (the
/// first lanes take one more), actor ids `ID/0`, `ID/1`, …; one lane is
/// `opts` itself.
pub fn lane_options(opts: &ActorOptions, lanes: u32) -> anyhow::Result<Vec<ActorOptions>> {
    let envs = opts.player.envs;
    anyhow::ensure!(
        (1..=envs).contains(&lanes),
        "{lanes} lanes for {envs} envs: every lane needs an env (1 to {envs} lanes)"
    );
    if lanes == 1 {
        return Ok(vec![opts.clone()]);
    }
    Ok((0..lanes)
        .map(|k| {
            let mut o = opts.clone();
            o.player.envs = envs / lanes + u32::from(k < envs % lanes);
            o.player.actor_id = format!("{}/{k}", opts.player.actor_id);
            o
        })
        .collect())
}

/// Plays every lane of `opts` until each has ended; each lane's outcome, in
/// lane order. Call it on the thread that steps envs (inside `block_on`):
/// the lanes take turns there, each yielding while it waits for the
/// learner.
pub async fn run_lanes(
    opts: &ActorOptions,
    lanes: u32,
    cancel: CancellationToken,
) -> anyhow::Result<Vec<anyhow::Result<ActorReport>>> {
    let local = tokio::task::LocalSet::new();
    let handles: Vec<_> = lane_options(opts, lanes)?
        .into_iter()
        .map(|o| local.spawn_local(run(o, cancel.clone())))
        .collect();
    let outcomes = local
        .run_until(async {
            let mut out = Vec::with_capacity(handles.len());
            for h in handles {
                out.push(h.await.unwrap_or_else(|e| Err(e.into())));
            }
            out
        })
        .await;
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::{Inference, Player};
    use rlfleet_quic::{Liveness, Trust};
    use std::time::Duration;

    fn opts(envs: u32) -> ActorOptions {
        ActorOptions {
            server: "127.0.0.1:1".into(),
            server_name: None,
            trust: Trust::Pin("00".into()),
            player: Player {
                actor_id: "node-7".into(),
                token: String::new(),
                envs,
                once: true,
                run: None,
                inference: Inference::Auto,
                env_factory: None,
            },
            liveness: Liveness {
                keep_alive: Duration::from_secs(1),
                idle_timeout: Duration::from_secs(5),
            },
            max_frame_bytes: 1 << 20,
            give_up_after: Duration::from_secs(1),
            reply_timeout: None,
        }
    }

    #[test]
    fn envs_split_as_evenly_as_they_go_with_an_id_per_lane() {
        let lanes = lane_options(&opts(8), 3).unwrap();
        let envs: Vec<u32> = lanes.iter().map(|o| o.player.envs).collect();
        let ids: Vec<&str> = lanes.iter().map(|o| o.player.actor_id.as_str()).collect();
        assert_eq!(envs, [3, 3, 2]);
        assert_eq!(ids, ["node-7/0", "node-7/1", "node-7/2"]);
        let one = lane_options(&opts(8), 1).unwrap();
        assert_eq!(one[0].player.actor_id, "node-7");
        assert_eq!(one[0].player.envs, 8);
    }

    #[test]
    fn a_lane_without_an_env_is_refused() {
        let e = lane_options(&opts(2), 3).unwrap_err().to_string();
        assert!(e.contains("3 lanes for 2 envs"), "{e}");
        assert!(lane_options(&opts(2), 0).is_err());
    }
}

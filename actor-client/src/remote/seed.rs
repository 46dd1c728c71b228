//! `seed` and `seed-a2c` on the actor: no model here. Every env's
//! observation goes to the learner (with the outcome of its last action)
//! and the actions that come back are played.

use super::{Carry, Link, Player, SessionEnd, answer};
use crate::envs::EnvSlots;
use rlfleet_shared::env::newest;
use rlfleet_shared::wire::{Message, Observations, Welcome, flags};

/// `seed`: no model here. Send every env's observation (with the outcome
/// of its last action), play the actions that come back.
pub(super) async fn play_seed<L: Link>(
    player: &Player,
    fs: &mut L,
    w: &Welcome,
    carry: &mut Carry,
) -> anyhow::Result<SessionEnd> {
    let mut envs = match EnvSlots::new(w, player.env_factory.as_ref()) {
        Ok(envs) => envs,
        Err(e) => return Ok(SessionEnd::Cannot(format!("{e:#}"))),
    };
    envs.start(&w.starts)?;
    // An env that raised in its first reset is idle until the next reply.
    let (ad, n) = (envs.act_dim, envs.slots.len());
    // Per env: the flags and reward to report next.
    let mut flag: Vec<u8> = envs
        .slots
        .iter()
        .map(|s| {
            if s.episode.is_some() {
                flags::FRESH
            } else {
                flags::IDLE
            }
        })
        .collect();
    let mut rewards = vec![0f32; n];
    // With `frame_stack`, the learner keeps each env's stack: only the
    // newest frame goes.
    let stack = w.frame_stack.max(1) as usize;
    let mut seq = 0;
    loop {
        seq += 1;
        let (mut obs, mut obs_u8) = (Vec::new(), Vec::new());
        for s in &envs.slots {
            let frame = newest(&s.obs, stack);
            if w.obs_u8 {
                obs_u8.extend(frame.iter().map(|&x| x as u8));
            } else {
                obs.extend_from_slice(frame);
            }
        }
        let req = Observations {
            seq,
            obs,
            obs_u8,
            rewards: rewards.clone(),
            flags: flag.clone(),
            faults: envs.take_faults(),
        };
        carry.report.inference_requests += 1;
        let m = match answer(fs.call(Message::Observations(req)).await)? {
            Ok(m) => m,
            Err(end) => return Ok(end),
        };
        let Message::Actions(a) = m else {
            anyhow::bail!("expected actions, got {}", m.kind());
        };
        anyhow::ensure!(
            a.actions.len() == n * ad,
            "actions for {} values, expected {}",
            a.actions.len(),
            n * ad
        );
        for i in 0..n {
            let acting = flag[i] & (flags::IDLE | flags::TERMINATED | flags::TRUNCATED) == 0;
            if acting && envs.slots[i].episode.is_some() {
                let Some(step) = envs.step(i, &a.actions[i * ad..(i + 1) * ad])? else {
                    // The env raised: idle now, the fault goes with the
                    // next request.
                    rewards[i] = 0.0;
                    flag[i] = flags::IDLE;
                    continue;
                };
                carry.report.env_steps += 1;
                rewards[i] = step.reward as f32;
                flag[i] = (u8::from(step.terminated) * flags::TERMINATED)
                    | (u8::from(step.truncated) * flags::TRUNCATED);
                if step.done() {
                    envs.slots[i].episode = None;
                    carry.report.episodes += 1;
                }
            } else {
                envs.slots[i].episode = None;
                rewards[i] = 0.0;
                flag[i] = flags::IDLE;
            }
        }
        envs.start(&a.starts)?;
        for s in &a.starts {
            // An env that raised in reset stays idle (its fault is pending).
            let started = envs.slots[s.env as usize].episode.is_some();
            flag[s.env as usize] = if started { flags::FRESH } else { flags::IDLE };
            rewards[s.env as usize] = 0.0;
        }
    }
}

//! Giving a batch's steps to the agent. Each run is judged against the
//! ledger first: steps of an earlier play of their episode (the episode
//! was handed out again) are superseded, steps of a finished episode
//! resent are duplicates. Each step is then judged against what the agent
//! holds of its play ([`Plays`]): given once, in order, or — after a hole —
//! only once the agent was told to end the trajectory it holds.

use super::Core;
use super::plays::{Admit, Plays};
use crate::vocab::{ConnId, DropReason};
use crate::workflows::remote::frames::Frames;
use crate::workflows::remote::ledger::Standing;
use rlfleet_learning::agents::Agent;
use rlfleet_replay::Transition;
use rlfleet_shared::wire::{Experience, RUN_GOES_ON, StepRef};

/// What became of a batch's steps at the agent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(in crate::workflows::remote) struct Given {
    pub given: u64,
    /// Of an earlier play of their episode.
    pub superseded: u64,
    /// Given before.
    pub duplicate: u64,
}

impl Given {
    /// Why the batch counts dropped: no step of it reached the agent, for
    /// this reason.
    pub fn dropped(&self) -> Option<DropReason> {
        if self.given > 0 {
            None
        } else if self.superseded > 0 {
            Some(DropReason::Superseded)
        } else if self.duplicate > 0 {
            Some(DropReason::Duplicate)
        } else {
            None
        }
    }

    /// Steps kept from the agent.
    pub fn withheld(&self) -> u64 {
        self.superseded + self.duplicate
    }
}

/// Whether step `s` goes to the agent (telling it first to end the
/// trajectory it holds, where `s` does not continue it).
fn admit(
    agent: &mut dyn Agent,
    plays: &mut Plays,
    verdicts: &[Option<DropReason>],
    s: &StepRef,
    given: &mut Given,
) -> bool {
    match verdicts[s.run] {
        Some(DropReason::Superseded) => given.superseded += 1,
        Some(_) => given.duplicate += 1,
        None => match plays.admit(s.episode, s.index) {
            Admit::Duplicate => given.duplicate += 1,
            Admit::Give { close, .. } => {
                if close {
                    agent.end_episode(s.episode);
                }
                given.given += 1;
                return true;
            }
        },
    }
    false
}

impl Core {
    /// `steps` steps of `episode` will never reach the agent (an `rma`
    /// pool pushed their batch out).
    pub fn steps_lost(&mut self, episode: u64, steps: u32) {
        self.plays.lost(episode, steps);
    }

    /// Plays the agent may still be given steps of (bounded by the
    /// episodes in play).
    #[cfg(test)]
    pub fn plays_open(&self) -> usize {
        self.plays.len()
    }

    /// For each run of `e` from `conn`: `None` when its steps are of the
    /// play the ledger knows, else why they are not given. `pooled`: taken
    /// out of an `rma` pool (its ends were counted at deposit, so a
    /// finished episode's steps may still come); `resend`: sent in an
    /// earlier session of the actor.
    fn judge(
        &self,
        conn: ConnId,
        e: &Experience,
        pooled: bool,
        resend: bool,
    ) -> Vec<Option<DropReason>> {
        let ledger = self.ledger();
        let present = self.actors.contains_key(&conn);
        e.steps
            .runs
            .iter()
            .map(|r| match ledger.standing(r.episode) {
                Standing::Held(h) if h == (conn, r.env) && !resend => None,
                // Waiting to be handed out again: what its play sent is
                // still its play (a faulted play in a pool is not).
                Standing::Waiting if resend || !pooled || !present => None,
                Standing::Finished if pooled && !resend => None,
                Standing::Finished => Some(DropReason::Duplicate),
                _ => Some(DropReason::Superseded),
            })
            .collect()
    }

    /// Gives `e`'s steps from `conn` to the agent, as far as they belong
    /// to it; ends at the agent, for batches out of a pool, the episodes
    /// whose last step it was given.
    pub(super) fn give(
        &mut self,
        conn: ConnId,
        e: &Experience,
        pooled: bool,
        resend: bool,
    ) -> Given {
        let verdicts = self.judge(conn, e, pooled, resend);
        let mut given = Given::default();
        let (od, ad) = (self.obs_dim(), self.act_dim());
        let t = &e.steps;
        let (agent, plays) = (&mut self.agent, &mut self.plays);
        let step = |s: &StepRef| Transition::<'_, u8> {
            episode: s.episode,
            step: s.index,
            obs: &[],
            action: &t.actions[s.step * ad..(s.step + 1) * ad],
            reward: t.rewards[s.step],
            next_obs: &[],
            terminated: s.terminated,
            logp: t.logp.get(s.step).copied(),
        };
        // A run's first step was acted from the state the batch says.
        let sl = t.states.len() / t.runs.len().max(1);
        let acted_from = |agent: &mut Box<dyn Agent>, s: &StepRef| {
            if sl > 0 && s.index == t.runs[s.run].first {
                agent.acted_from(s.episode, &t.states[s.run * sl..(s.run + 1) * sl]);
            }
        };
        if let Some(frames) = &mut self.frames {
            // Single frames: each env's stack, kept here, makes the
            // observations.
            let missing = match frames {
                Frames::Values(f) => f.stack_steps(conn, t, |s, stacks| {
                    if let Some((obs, next)) = stacks
                        && admit(agent.as_mut(), plays, &verdicts, s, &mut given)
                    {
                        acted_from(agent, s);
                        agent.observe(&step(s).with_obs(obs, next));
                    }
                }),
                // A uint8 run's stacks reach the agent as bytes.
                Frames::Bytes(f) => f.stack_steps(conn, t, |s, stacks| {
                    if let Some((obs, next)) = stacks
                        && admit(agent.as_mut(), plays, &verdicts, s, &mut given)
                    {
                        acted_from(agent, s);
                        agent.observe_bytes(&step(s).with_obs(obs, next));
                    }
                }),
            };
            self.metrics
                .transitions_unstacked
                .inc_by(u64::from(missing));
        } else {
            // Each observation is in the batch once: the last one read is
            // the next one's first.
            let (mut obs, mut next) = (vec![0f32; od], vec![0f32; od]);
            let mut have = usize::MAX;
            for s in t.transitions() {
                if !admit(agent.as_mut(), plays, &verdicts, &s, &mut given) {
                    continue;
                }
                if have == s.obs {
                    std::mem::swap(&mut obs, &mut next);
                } else {
                    t.obs_into(s.obs, &mut obs);
                }
                t.obs_into(s.obs + 1, &mut next);
                have = s.obs + 1;
                acted_from(agent, &s);
                agent.observe(&step(&s).with_obs(&obs, &next));
            }
        }
        for (r, run) in t.runs.iter().enumerate() {
            if verdicts[r].is_some() {
                continue;
            }
            // A pool's ends reach the agent with their last step (the
            // ledger counted them at deposit); a late run of an ended
            // play is a trajectory of its own.
            let close = if pooled && !resend && run.end != RUN_GOES_ON {
                self.plays.ended(run.episode, run.first + run.steps)
            } else {
                self.plays.after_run(run.episode)
            };
            if close {
                self.agent.end_episode(run.episode);
            }
        }
        given
    }
}

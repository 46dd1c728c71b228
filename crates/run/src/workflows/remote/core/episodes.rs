//! Episodes on the run thread: ids handed out through the shared
//! [`EpisodeLedger`] (also from the `rma` pools, at deposit), finished
//! episodes counted once and written out, and the env steps of episodes
//! whose actor left before finishing them (abandoned: the episode is
//! played again from its start), so that env steps = the finished
//! episodes' lengths + abandoned steps + steps of episodes in play.

use super::Core;
use super::books::ORPHANED;
use crate::metrics::RunMetrics;
use crate::vocab::ConnId;
use crate::vocab::EpisodeView;
use crate::workflows::remote::ledger::{EpisodeLedger, Finish, Standing};
use crate::workflows::seeds::episode_seed;
use rlfleet_shared::wire::{EnvFaultReport, EpisodeStart};

/// Hands out episodes to the given envs of `conn`, as far as the ledger
/// allows (the fetch-and-add of the `rma` workflows).
pub(in crate::workflows::remote) fn issue_starts(
    ledger: &mut EpisodeLedger,
    metrics: &RunMetrics,
    seed: u64,
    conn: ConnId,
    envs: &[u32],
) -> Vec<EpisodeStart> {
    let mut starts = Vec::new();
    for &env in envs {
        let Some((episode, reissued)) = ledger.issue((conn, env)) else {
            break;
        };
        if reissued {
            metrics.episodes_reissued.inc();
        } else {
            metrics.episodes_issued.inc();
        }
        starts.push(EpisodeStart {
            env,
            episode,
            seed: episode_seed(seed, episode),
        });
    }
    starts
}

impl Core {
    /// Hands out episodes to the given envs of `conn`, as far as the ledger
    /// allows.
    pub fn issue(&mut self, conn: ConnId, envs: &[u32]) -> Vec<EpisodeStart> {
        let starts = issue_starts(
            &mut self.ledger.lock().expect("ledger lock"),
            &self.metrics,
            self.book.cfg.seed,
            conn,
            envs,
        );
        self.settle_reissued();
        starts
    }

    /// Episodes handed out again (here, or at an `rma` deposit) start
    /// over: what was ingested of an earlier play nobody held — in play
    /// at a restored checkpoint, or resent — is abandoned, and the agent
    /// lets go of what it holds of that play.
    pub fn settle_reissued(&mut self) {
        let reissued = self.ledger().take_reissued();
        for episode in reissued {
            self.agent.abandon_episode(episode);
            self.plays.forget(episode);
            if let Some(n) = self.episode_steps.remove(&(ORPHANED, episode))
                && n > 0
            {
                self.abandon(n as u64);
            }
        }
    }

    /// `n` env steps of `episode`, played by `conn`, were ingested
    /// (`checked`: look up who holds the episode; batches popped from the
    /// `rma` pools were checked at deposit, where their ends were counted).
    /// `resend`: the batch came from an earlier session of the actor; its
    /// steps belong to an earlier play of the episode.
    pub fn steps_ingested(
        &mut self,
        conn: ConnId,
        episode: u64,
        n: u64,
        checked: bool,
        resend: bool,
    ) {
        if resend {
            if self.ledger().standing(episode) == Standing::Waiting {
                *self.episode_steps.entry((ORPHANED, episode)).or_default() += n as i64;
            } else {
                // Played again (maybe by this very connection) or done.
                self.abandon(n);
            }
            return;
        }
        let key = (conn, episode);
        if let Some(open) = self.episode_steps.get_mut(&key) {
            *open += n as i64;
            if *open == 0 {
                self.episode_steps.remove(&key);
            }
            return;
        }
        if !self.actors.contains_key(&conn) {
            // Its actor left: the episode was re-issued.
            self.abandon(n);
            return;
        }
        let standing = if checked {
            self.ledger().standing(episode)
        } else {
            Standing::Held((conn, 0))
        };
        match standing {
            Standing::Held((c, _)) if c == conn => {
                self.episode_steps.insert(key, n as i64);
            }
            // Resent after a reconnect or a restore: the episode may yet
            // be finished by a later resend, or handed out again.
            Standing::Waiting => {
                *self.episode_steps.entry((ORPHANED, episode)).or_default() += n as i64;
            }
            // Someone else plays it now, or it is done: these steps are
            // not part of the episode that counts.
            _ => self.abandon(n),
        }
    }

    /// A resent batch ends `episode` (waiting to be played again) after
    /// `length` steps: true if that many of its steps were ingested. If not
    /// — a batch of it was received by a learner process that died after
    /// its last checkpoint — the steps on record are abandoned and the
    /// episode stays waiting, to be played again from its start.
    pub fn resent_end_whole(&mut self, episode: u64, length: u32) -> bool {
        let on_record = self
            .episode_steps
            .get(&(ORPHANED, episode))
            .copied()
            .unwrap_or(0);
        if on_record == i64::from(length) {
            return true;
        }
        tracing::info!(
            run = %self.id,
            episode,
            length,
            on_record,
            "a resent episode end misses steps lost with a learner process: the episode is played again"
        );
        self.episode_steps.remove(&(ORPHANED, episode));
        self.abandon(on_record.max(0) as u64);
        false
    }

    /// `conn`'s `episode` of `length` steps was counted finished.
    pub fn episode_counted(&mut self, conn: ConnId, episode: u64, length: u32) {
        let key = (conn, episode);
        // Finished by a batch resent after a restore: the steps ingested
        // before the checkpoint are part of it.
        let before = self.episode_steps.remove(&(ORPHANED, episode)).unwrap_or(0);
        let open = self.episode_steps.entry(key).or_default();
        *open += before - i64::from(length);
        if *open == 0 {
            self.episode_steps.remove(&key);
        }
    }

    /// `conn`'s env raised while playing `f.episode`: the episode goes back
    /// to the queue (played again from its seed), the steps of it already
    /// ingested are counted abandoned, the fault logged and counted.
    pub fn env_fault(&mut self, conn: ConnId, f: &EnvFaultReport) {
        let requeued = self.ledger().requeue(f.episode, (conn, f.env));
        self.fault_ingested(conn, f.episode);
        self.count_fault(conn, f, requeued);
    }

    /// The steps of a faulted episode already ingested are abandoned.
    pub fn fault_ingested(&mut self, conn: ConnId, episode: u64) {
        if let Some(n) = self.episode_steps.remove(&(conn, episode))
            && n > 0
        {
            self.abandon(n as u64);
        }
    }

    /// Logs and counts an env fault.
    pub fn count_fault(&mut self, conn: ConnId, f: &EnvFaultReport, requeued: bool) {
        let actor = self.actors.get(&conn).map_or("?", |s| s.actor_id.as_str());
        tracing::warn!(
            run = %self.id,
            actor,
            env = f.env,
            episode = f.episode,
            requeued,
            "an actor's env raised {}",
            f.error
        );
        self.metrics.env_errors.inc();
        self.book.env_errors += 1;
        self.errors_in_a_row.0 += 1;
        self.errors_in_a_row.1.clone_from(&f.error);
    }

    /// Why the run cannot go on, if it cannot: its envs raise and raise
    /// with no episode finished in between, or its loss is no longer a
    /// number. The driver fails the run with this.
    pub fn broken(&self) -> Option<String> {
        let (n, last) = &self.errors_in_a_row;
        if *n >= self.cfg().distributed.max_env_errors_in_a_row {
            return Some(format!(
                "its environment raised {n} times in a row with no episode finished \
                 (distributed.max_env_errors_in_a_row); the last: {last}"
            ));
        }
        match self.agent.last_loss() {
            Some(l) if !l.is_finite() => Some(format!(
                "training diverged: the loss is {l} after {} gradient steps",
                self.agent.train_steps()
            )),
            _ => None,
        }
    }

    pub(in crate::workflows::remote) fn abandon(&mut self, steps: u64) {
        self.abandoned += steps;
        self.metrics.env_steps_abandoned.inc_by(steps);
    }

    /// Counts a finished episode reported for (conn, env) if the ledger
    /// agrees it is the reporter's to finish.
    pub fn finish_episode(
        &mut self,
        conn: ConnId,
        env: u32,
        episode: u64,
        ret: f64,
        length: u32,
    ) -> anyhow::Result<()> {
        let finish = self.ledger().finish(episode, (conn, env));
        if finish != Finish::Counted {
            tracing::debug!(episode, ?finish, "episode end not counted");
            return Ok(());
        }
        self.errors_in_a_row.0 = 0;
        self.agent.end_episode(episode);
        self.plays.forget(episode);
        self.episode_counted(conn, episode, length);
        let actor = self.actors.get(&conn).map_or(u32::MAX, |s| s.index);
        self.record_episode(actor, episode, ret, length)
    }

    /// Writes out a finished episode the ledger counted.
    pub fn record_episode(
        &mut self,
        actor: u32,
        episode: u64,
        ret: f64,
        length: u32,
    ) -> anyhow::Result<()> {
        let version = self.agent.train_steps();
        self.book.episode(episode, actor, ret, length, version);
        self.metrics.episodes_finished.inc();
        self.metrics.episode_return.observe(ret);
        self.shared
            .episodes
            .lock()
            .expect("episodes lock")
            .push(EpisodeView {
                episode,
                actor,
                ret,
                length,
                policy_version: version,
                env_steps: self.book.counters.env_steps,
                wall_secs: self.book.counters.wall_secs,
            });
        Ok(())
    }
}

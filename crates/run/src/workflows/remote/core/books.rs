//! A distributed run's books in its checkpoints — the episode ledger, the
//! batch accounts, the dedup keys, the abandoned steps and the batches lost
//! over restarts — and how a resumed run takes them up: every episode in
//! play at the checkpoint is re-issued from its start (its ingested steps
//! count as abandoned), every `(actor, session, seq)` trained before it is
//! still refused as a duplicate, and the batches the dead process received
//! after it (the run's [`Journal`](crate::state::Journal) minus the
//! checkpoint's count) are counted lost.

use super::Core;
use crate::state::Journal;
use crate::workflows::book::RunBooks;
use crate::workflows::remote::accounts::TallyImage;
use crate::workflows::remote::ledger::{EpisodeLedger, LedgerImage};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// The connection steps of episodes nobody holds are filed under: those in
/// play at a restored checkpoint, and those an actor resent after it
/// reconnected (its new connection does not hold the episode). They count
/// toward the episode if a resent batch finishes it, and are abandoned when
/// it is handed out again. (Real connections count from 1.)
pub(in crate::workflows::remote) const ORPHANED: crate::vocab::ConnId = 0;

/// The run's part of a checkpoint's books (`RunBook` keeps the rest).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(in crate::workflows::remote) struct CoreBooks {
    pub ledger: LedgerImage,
    pub tally: TallyImage,
    /// `(actor id, session id, highest seq trained)`.
    pub trained_seq: Vec<(String, u64, u64)>,
    pub abandoned: u64,
    /// `(episode, env steps ingested)` of the episodes in play at the
    /// checkpoint. A resumed run re-issues them: when one is handed out
    /// again its steps become abandoned; when an actor's resent batch
    /// finishes it instead, they count toward its length.
    pub in_play: Vec<(u64, u64)>,
    /// Batches lost over the run's earlier restarts.
    pub batches_lost: u64,
    /// The workflow's own state (`orchestrated`: the rate limiter's
    /// counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<serde_json::Value>,
}

/// What taking up the books found.
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::workflows::remote) struct Restored {
    /// Batches the dead process received after the checkpoint.
    pub lost_now: u64,
}

impl Core {
    /// The run's books now, and the lengths of the files only the run
    /// writes (`batches.csv`), after flushing them.
    pub fn books(&self) -> anyhow::Result<RunBooks> {
        let mut files = BTreeMap::new();
        if let Some(len) = self.accounts.flush_log()? {
            files.insert("batches.csv".to_string(), len);
        }
        let mut trained_seq: Vec<(String, u64, u64)> = self
            .trained_seq
            .iter()
            .map(|((actor, session), &seq)| (actor.clone(), *session, seq))
            .collect();
        trained_seq.sort();
        let books = CoreBooks {
            ledger: self.ledger().image(),
            tally: self.accounts.tally.lock().expect("tally lock").image(),
            trained_seq,
            abandoned: self.abandoned,
            in_play: {
                let mut per: BTreeMap<u64, u64> = BTreeMap::new();
                for (&(_, episode), &n) in &self.episode_steps {
                    if n > 0 {
                        *per.entry(episode).or_default() += n as u64;
                    }
                }
                per.into_iter().collect()
            },
            batches_lost: self.batches_lost,
            workflow: self.workflow_books.clone(),
        };
        Ok((
            serde_json::to_value(&books).expect("plain data serialises"),
            files,
        ))
    }

    /// Takes a checkpoint if one is due (the snapshot, queued for the
    /// desk); says whether it took one.
    pub fn checkpoint_if_due(&mut self) -> anyhow::Result<bool> {
        if !self.book.take_checkpoint_due() {
            return Ok(false);
        }
        let books = self.books()?;
        self.book
            .checkpoint(self.agent.as_ref(), Some(books), false);
        Ok(true)
    }

    /// Takes up the books of the checkpoint the run resumed from (if it
    /// has any) and the run's journal (opened by the driver, from the
    /// run's record), and says so in the status.
    pub fn resume(&mut self, journal: Option<Journal>) -> anyhow::Result<()> {
        let saved = self.book.restored_run.take();
        let restored = self.restore_books(saved, journal)?;
        if let Some(mut from) = self.book.resumed_from.clone() {
            from.batches_lost = restored.lost_now;
            tracing::info!(
                run = %self.id,
                env_steps = from.env_steps,
                batches_lost = from.batches_lost,
                "run resumed from {}",
                from.checkpoint
            );
            let mut s = self.shared.status.lock().expect("status lock");
            s.resumed_from = Some(from);
        }
        Ok(())
    }

    fn restore_books(
        &mut self,
        saved: Option<serde_json::Value>,
        journal: Option<Journal>,
    ) -> anyhow::Result<Restored> {
        let saved: Option<CoreBooks> = saved
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| anyhow::anyhow!("the run's books in the checkpoint are damaged: {e}"))?;
        let mut restored = Restored::default();
        if let Some(b) = &saved {
            *self.ledger() = EpisodeLedger::restore(self.cfg().stop.max_episodes, &b.ledger);
            self.accounts
                .tally
                .lock()
                .expect("tally lock")
                .restore(&b.tally)?;
            self.trained_seq = b
                .trained_seq
                .iter()
                .map(|(a, s, q)| ((a.clone(), *s), *q))
                .collect::<HashMap<_, _>>();
            self.abandoned = b.abandoned;
            for &(episode, n) in &b.in_play {
                self.episode_steps.insert((ORPHANED, episode), n as i64);
            }
            self.batches_lost = b.batches_lost;
            self.workflow_books = b.workflow.clone();
        }
        let Some(mut journal) = journal else {
            return Ok(restored);
        };
        let checkpointed = saved.as_ref().map_or(0, |b| b.tally.received);
        if saved.is_some() {
            restored.lost_now = journal.get().saturating_sub(checkpointed);
            self.batches_lost += restored.lost_now;
            self.metrics.batches_lost.inc_by(restored.lost_now);
        }
        journal.set(checkpointed);
        self.accounts.tally.lock().expect("tally lock").journal = Some(journal);
        Ok(restored)
    }
}

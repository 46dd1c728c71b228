//! `rma-queue-pop-all`'s fetcher: a thread that takes every pending batch
//! of the next actor out of the [`Pools`] and hands the set to the run
//! thread, then takes the next actor's while the run thread trains (one
//! set waits at most).

use super::super::input::{Input, Internal, Popped};
use super::pools::{Inner, Pools};
use std::sync::mpsc;
use std::time::Duration;

impl Pools {
    /// `rma-queue-pop-all`'s fetcher, on its own thread: takes every
    /// pending batch of the next actor and hands them to the run thread as
    /// `Internal::Fetched`, then — while the run thread trains on them — the
    /// next actor's, which waits in the channel until the run thread has
    /// taken the previous set. Ends when the pools close.
    pub(in crate::workflows::remote) fn fetch_loop(&self, run: mpsc::SyncSender<Input>) {
        loop {
            {
                let mut waiting = self.fetched_waiting.lock().expect("fetch lock");
                while *waiting {
                    if self.is_closed() {
                        return;
                    }
                    waiting = self
                        .fetched_taken
                        .wait_timeout(waiting, Duration::from_millis(50))
                        .expect("fetch lock")
                        .0;
                }
            }
            let set = {
                let mut g = self.inner.lock().expect("pools lock");
                loop {
                    if g.closed.is_some() {
                        return;
                    }
                    let set = if g.hold_fetch {
                        Vec::new()
                    } else {
                        Self::pop_all_next(&mut g)
                    };
                    if !set.is_empty() {
                        // Marked out under the pools lock: a checkpoint
                        // sees it taken from the pools and not yet trained.
                        *self.fetched_waiting.lock().expect("fetch lock") = true;
                        break set;
                    }
                    g = self
                        .deposited
                        .wait_timeout(g, Duration::from_millis(50))
                        .expect("pools lock")
                        .0;
                }
            };
            if run.send(Input::Internal(Internal::Fetched(set))).is_err() {
                return;
            }
        }
    }

    /// The run thread took a fetched set: the fetcher may take the next.
    pub(super) fn fetched_taken(&self) {
        *self.fetched_waiting.lock().expect("fetch lock") = false;
        self.fetched_taken.notify_all();
    }

    fn is_closed(&self) -> bool {
        self.inner.lock().expect("pools lock").closed.is_some()
    }

    /// Every pending batch of the next actor (after the one served last)
    /// that has any, oldest first.
    fn pop_all_next(g: &mut Inner) -> Popped {
        let after = g.cursor;
        let next = g
            .pools
            .range(after + 1..)
            .chain(g.pools.range(..=after))
            .find(|(_, p)| !p.batches.is_empty())
            .map(|(&c, _)| c);
        let mut out = Vec::new();
        if let Some(conn) = next {
            g.cursor = conn;
            let pool = g.pools.get_mut(&conn).expect("found");
            out.extend(pool.batches.drain(..).map(|b| (conn, b)));
        }
        g.pools.retain(|_, p| !(p.gone && p.batches.is_empty()));
        out
    }
}

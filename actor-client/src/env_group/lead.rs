//! The leader's side of an env group: [`GroupLead`] builds
//! [`GroupEnv`]s — envs whose `reset` and `step` run on every rank of the
//! group — for [`crate::envs::EnvSlots`], and ends the group's service
//! when the run is over.

use super::{Command, Outcome, Status, Worker, call_of, decode, encode};
use super::{TAG_COMMAND, TAG_NOTICE, TAG_STATUS};
use crate::envs::EnvFactory;
use rlfleet_shared::env::{Action, Env, EnvFault, EnvReply, EnvSource, EnvSpec, Step};
use rlfleet_shared::mpi::rsmpi::traits::{
    Communicator, Destination, MatchedReceiveVec, Source as _,
};
use rlfleet_shared::mpi::{Backoff, EnvComm, Group};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The group's control channel and counters, shared by its envs.
struct Inner {
    ctrl: Group,
    /// The group's index in the job, and its ranks in `MPI_COMM_WORLD`.
    index: usize,
    world: Vec<i32>,
    next_id: u64,
    seq: u64,
}

impl Inner {
    fn size(&self) -> i32 {
        self.ctrl.0.size()
    }

    fn send(&self, rank: i32, cmd: &Command) {
        self.ctrl
            .0
            .process_at_rank(rank)
            .send_with_tag(&encode(cmd)[..], TAG_COMMAND);
    }

    fn broadcast(&self, cmd: &Command) {
        for r in 1..self.size() {
            self.send(r, cmd);
        }
    }

    /// Tells every other rank that command `seq` failed here.
    fn notify(&self, seq: u64) {
        for r in 1..self.size() {
            self.ctrl
                .0
                .process_at_rank(r)
                .send_with_tag(&seq.to_le_bytes()[..], TAG_NOTICE);
        }
    }

    /// A status that has arrived (those of earlier commands are dropped).
    fn status(&self, seq: u64) -> Result<Option<Status>, String> {
        loop {
            let Some(probed) = self
                .ctrl
                .0
                .any_process()
                .immediate_matched_probe_with_tag(TAG_STATUS)
            else {
                return Ok(None);
            };
            let status: Status = decode(&probed.matched_receive_vec::<u8>().0)?;
            if status.seq == seq {
                return Ok(Some(status));
            }
        }
    }

    /// Names rank `rank` of the group in errors and logs.
    fn name(&self, rank: u32) -> String {
        let world = self.world.get(rank as usize).copied().unwrap_or(-1);
        format!(
            "rank {rank} of env group {} (world rank {world}; the group's ranks: {:?})",
            self.index, self.world
        )
    }
}

/// The actor rank that leads an env group.
#[derive(Clone)]
pub struct GroupLead(Arc<Mutex<Inner>>);

impl std::fmt::Debug for GroupLead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("GroupLead")
            .field("group", &inner.index)
            .field("ranks", &inner.world)
            .finish()
    }
}

impl GroupLead {
    /// `ctrl`: the group's communicator (this rank is its rank 0);
    /// `world`: the group's world ranks.
    pub fn new(ctrl: Group, index: usize, world: Vec<i32>) -> GroupLead {
        GroupLead(Arc::new(Mutex::new(Inner {
            ctrl,
            index,
            world,
            next_id: 0,
            seq: 0,
        })))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Builds the run's envs as group envs.
    pub fn factory(&self) -> EnvFactory {
        let lead = self.clone();
        EnvFactory(Arc::new(move |source, limit| {
            Ok(Box::new(lead.build(source, limit)?) as Box<dyn Env>)
        }))
    }

    /// Tells the other ranks to leave (the run is over).
    pub fn stop(&self) {
        self.lock().broadcast(&Command::Stop);
    }

    /// Builds an env on every rank of the group; fails, naming the rank,
    /// when one cannot build it or builds one of other sizes.
    fn build(&self, source: &EnvSource, limit: Option<Duration>) -> anyhow::Result<GroupEnv> {
        let mut inner = self.lock();
        let (id, seq) = (inner.next_id, inner.seq + 1);
        inner.next_id += 1;
        inner.seq = seq;
        inner.broadcast(&Command::Build {
            id,
            seq,
            source: source.clone(),
        });
        let (comm, abandon) = EnvComm::new(inner.ctrl.0.duplicate());
        let built = source.make_in(Some(Box::new(comm)));
        let mut statuses = Vec::new();
        let mut backoff = backoff();
        while statuses.len() + 1 < inner.size() as usize {
            match inner.status(seq).map_err(anyhow::Error::msg)? {
                Some(s) => statuses.push(s),
                None => backoff.wait(),
            }
        }
        let drop_all = |inner: &Inner| inner.broadcast(&Command::Drop { id });
        let env = match built {
            Ok(env) => env,
            Err(e) => {
                drop_all(&inner);
                anyhow::bail!("{}: {e}", inner.name(0));
            }
        };
        let spec = env.spec().clone();
        let mine = (spec.obs_dim() as u64, spec.action_space.flat_dim() as u64);
        statuses.sort_by_key(|s| s.rank);
        for s in &statuses {
            let problem = match &s.outcome {
                Outcome::Done {
                    obs_dim,
                    action_dim,
                } if (*obs_dim, *action_dim) == mine => continue,
                Outcome::Done {
                    obs_dim,
                    action_dim,
                } => format!(
                    "built `{}` with {obs_dim} observation values and action size \
                     {action_dim}, the leader's has {} and {}: every rank of a group must build \
                     the same env",
                    source.id, mine.0, mine.1
                ),
                Outcome::Raised(e) => format!("could not build `{}`: {e}", source.id),
                Outcome::Abandoned => "abandoned the build".into(),
            };
            drop_all(&inner);
            anyhow::bail!("{}: {problem}", inner.name(s.rank));
        }
        drop(inner);
        Ok(GroupEnv {
            lead: self.clone(),
            id,
            spec,
            worker: Some(Worker::new(env, abandon)),
            limit,
            elapsed: 0,
        })
    }
}

fn backoff() -> Backoff {
    Backoff::new(64, Duration::from_micros(200))
}

/// One env instance spanning the group: the leader's copy on a thread,
/// the others' on theirs.
pub struct GroupEnv {
    lead: GroupLead,
    id: u64,
    spec: EnvSpec,
    /// `None` once abandoned (a call was stuck when another rank raised).
    worker: Option<Worker>,
    /// `env_step_timeout_secs`.
    limit: Option<Duration>,
    elapsed: u32,
}

impl std::fmt::Debug for GroupEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupEnv")
            .field("id", &self.id)
            .field("env", &self.spec.id)
            .finish()
    }
}

impl GroupEnv {
    /// Runs `cmd` on every rank; the leader's reply, or the first fault
    /// (its rank named).
    fn collective(&mut self, cmd: impl FnOnce(u64) -> Command) -> EnvReply {
        let Some(worker) = &self.worker else {
            return Err(EnvFault(
                "the env was abandoned after another rank raised".into(),
            ));
        };
        let mut inner = self.lead.lock();
        inner.seq += 1;
        let seq = inner.seq;
        let cmd = cmd(seq);
        inner.broadcast(&cmd);
        worker.start(call_of(&cmd).expect("a reset or a step"));
        let deadline = self.limit.map(|l| Instant::now() + l);
        let others = inner.size() as usize - 1;
        let (mut own, mut answered) = (None, 0usize);
        let mut fault: Option<(u32, String)> = None;
        let mut backoff = backoff();
        loop {
            let mut progress = false;
            if own.is_none()
                && fault.is_none()
                && let Some(reply) = worker.poll()
            {
                if let Err(f) = &reply {
                    fault = Some((0, f.0.clone()));
                    inner.notify(seq);
                }
                own = Some(reply);
                progress = true;
            }
            match inner.status(seq) {
                Ok(Some(s)) => {
                    answered += 1;
                    progress = true;
                    if let Outcome::Raised(e) = s.outcome {
                        fault.get_or_insert((s.rank, e));
                    }
                }
                Ok(None) => {}
                Err(e) => return Err(EnvFault(e)),
            }
            let late = deadline.is_some_and(|d| Instant::now() > d);
            if late && fault.is_none() && own.is_none() {
                let secs = self.limit.map_or(0.0, |l| l.as_secs_f64());
                fault = Some((
                    0,
                    format!(
                        "TimeoutError: the step took longer than env_step_timeout_secs ({secs} s)"
                    ),
                ));
                inner.notify(seq);
            }
            if answered == others && (own.is_some() || fault.is_some()) {
                break;
            }
            if progress {
                backoff.reset();
            } else {
                backoff.wait();
            }
        }
        let name = fault.as_ref().map(|(r, _)| inner.name(*r));
        drop(inner);
        match (fault, own) {
            (None, Some(reply)) => reply,
            (Some((_, e)), own) => {
                if own.is_none() {
                    // Stuck, most likely in a collective the raising rank
                    // never reached.
                    if let Some(w) = self.worker.take() {
                        w.abandon();
                    }
                }
                let name = name.expect("a fault names its rank");
                Err(EnvFault(format!("{e} (on {name})")))
            }
            (None, None) => unreachable!("the loop ends with a reply or a fault"),
        }
    }
}

impl Drop for GroupEnv {
    fn drop(&mut self) {
        self.lead.lock().broadcast(&Command::Drop { id: self.id });
    }
}

impl Env for GroupEnv {
    fn spec(&self) -> &EnvSpec {
        &self.spec
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        self.try_reset(seed, obs)
            .unwrap_or_else(|e| panic!("reset failed: {e}"));
    }

    fn step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Step {
        self.try_step(action, obs)
            .unwrap_or_else(|e| panic!("step failed: {e}"))
    }

    /// Not available: the env lives on the group's threads.
    fn state(&self) -> Vec<f64> {
        panic!("the state of an env group's env is not available")
    }

    /// Not available: the env lives on the group's threads.
    fn set_state(&mut self, _state: &[f64]) {
        panic!("the state of an env group's env is not available")
    }

    fn elapsed_steps(&self) -> u32 {
        self.elapsed
    }

    fn try_reset(&mut self, seed: Option<u64>, obs: &mut [f32]) -> Result<(), EnvFault> {
        // Every rank must draw the same episode: an unseeded reset gets a
        // seed drawn here.
        let seed = seed.unwrap_or_else(|| rlfleet_shared::env::EnvRng::from_clock().next_u64());
        let id = self.id;
        let (o, _) = self.collective(|seq| Command::Reset { id, seq, seed })?;
        obs.copy_from_slice(&o);
        self.elapsed = 0;
        Ok(())
    }

    fn try_step(&mut self, action: Action<'_>, obs: &mut [f32]) -> Result<Step, EnvFault> {
        let (discrete, action) = match action {
            Action::Discrete(i) => (Some(i as u64), Vec::new()),
            Action::Continuous(a) => (None, a.to_vec()),
        };
        let id = self.id;
        let (o, step) = self.collective(|seq| Command::Step {
            id,
            seq,
            discrete,
            action,
        })?;
        obs.copy_from_slice(&o);
        self.elapsed += 1;
        Ok(step.expect("a step is answered with a step"))
    }
}

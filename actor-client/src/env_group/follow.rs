//! A rank of an env group other than its leader: builds, resets and steps
//! its copy of each of the group's envs as the leader's commands say,
//! answers each, and tells the others when its env raises.

use super::{Command, Outcome, Status, Worker, call_of, decode, encode};
use super::{TAG_COMMAND, TAG_NOTICE, TAG_STATUS};
use rlfleet_shared::env::EnvSource;
use rlfleet_shared::mpi::rsmpi::traits::{Communicator, Destination, MatchedReceiveVec, Source};
use rlfleet_shared::mpi::{Backoff, EnvComm, SimpleCommunicator};
use std::collections::HashMap;
use std::time::Duration;

/// What a follower did, for its report line.
#[derive(Debug, Default, Clone, Copy)]
pub struct Followed {
    pub builds: u64,
    pub steps: u64,
    /// Calls of this rank's env that raised.
    pub raised: u64,
    /// Calls it stopped waiting for (another rank raised).
    pub abandoned: u64,
}

struct Follower<'a> {
    ctrl: &'a SimpleCommunicator,
    /// The newest command another rank said failed.
    noticed: u64,
    /// Env id → its worker (`None`: abandoned).
    envs: HashMap<u64, Option<Worker>>,
    done: Followed,
}

impl Follower<'_> {
    fn answer(&self, seq: u64, outcome: Outcome) {
        let status = Status {
            seq,
            rank: self.ctrl.rank() as u32,
            outcome,
        };
        self.ctrl
            .process_at_rank(0)
            .send_with_tag(&encode(&status)[..], TAG_STATUS);
    }

    /// Takes the notices that have arrived.
    fn read_notices(&mut self) {
        while let Some(probed) = self
            .ctrl
            .any_process()
            .immediate_matched_probe_with_tag(TAG_NOTICE)
        {
            let bytes = probed.matched_receive_vec::<u8>().0;
            if let Ok(seq) = <[u8; 8]>::try_from(&bytes[..]) {
                self.noticed = self.noticed.max(u64::from_le_bytes(seq));
            }
        }
    }

    /// Tells the other followers that command `seq` failed here (the
    /// leader learns it from the status).
    fn notify(&self, seq: u64) {
        let me = self.ctrl.rank();
        for r in (1..self.ctrl.size()).filter(|&r| r != me) {
            self.ctrl
                .process_at_rank(r)
                .send_with_tag(&seq.to_le_bytes()[..], TAG_NOTICE);
        }
    }

    fn next_command(&mut self) -> Result<Command, String> {
        let mut backoff = backoff();
        loop {
            self.read_notices();
            if let Some(probed) = self
                .ctrl
                .process_at_rank(0)
                .immediate_matched_probe_with_tag(TAG_COMMAND)
            {
                return decode(&probed.matched_receive_vec::<u8>().0);
            }
            backoff.wait();
        }
    }

    fn build(&mut self, id: u64, seq: u64, source: EnvSource) {
        let (comm, abandon) = EnvComm::new(self.ctrl.duplicate());
        self.done.builds += 1;
        let outcome = match source.make_in(Some(Box::new(comm))) {
            Ok(env) => {
                let spec = env.spec();
                let outcome = Outcome::Done {
                    obs_dim: spec.obs_dim() as u64,
                    action_dim: spec.action_space.flat_dim() as u64,
                };
                self.envs.insert(id, Some(Worker::new(env, abandon)));
                outcome
            }
            Err(e) => Outcome::Raised(e.to_string()),
        };
        self.answer(seq, outcome);
    }

    fn call(&mut self, id: u64, seq: u64, cmd: &Command) {
        self.read_notices();
        let Some(Some(worker)) = self.envs.remove(&id) else {
            let why = format!("env {id} is not on this rank (abandoned or never built)");
            return self.answer(seq, Outcome::Raised(why));
        };
        if self.noticed >= seq {
            self.envs.insert(id, Some(worker));
            self.done.abandoned += 1;
            return self.answer(seq, Outcome::Abandoned);
        }
        worker.start(call_of(cmd).expect("a reset or a step"));
        let mut backoff = backoff();
        loop {
            if let Some(reply) = worker.poll() {
                let outcome = match reply {
                    Ok((_, step)) => {
                        self.done.steps += u64::from(step.is_some());
                        Outcome::Done {
                            obs_dim: 0,
                            action_dim: 0,
                        }
                    }
                    Err(fault) => {
                        self.done.raised += 1;
                        self.notify(seq);
                        Outcome::Raised(fault.0)
                    }
                };
                self.envs.insert(id, Some(worker));
                return self.answer(seq, outcome);
            }
            self.read_notices();
            if self.noticed >= seq {
                // Most likely waiting in a collective that the raising
                // rank never reached.
                worker.abandon();
                self.envs.insert(id, None);
                self.done.abandoned += 1;
                return self.answer(seq, Outcome::Abandoned);
            }
            backoff.wait();
        }
    }
}

fn backoff() -> Backoff {
    Backoff::new(64, Duration::from_micros(200))
}

/// Follows the leader (rank 0 of `ctrl`) until it says stop.
pub fn serve(ctrl: &SimpleCommunicator) -> Result<Followed, String> {
    let mut f = Follower {
        ctrl,
        noticed: 0,
        envs: HashMap::new(),
        done: Followed::default(),
    };
    loop {
        let cmd = f.next_command()?;
        match cmd {
            Command::Build { id, seq, source } => f.build(id, seq, source),
            Command::Reset { id, seq, .. } | Command::Step { id, seq, .. } => f.call(id, seq, &cmd),
            Command::Drop { id } => {
                f.envs.remove(&id);
            }
            Command::Stop => return Ok(f.done),
        }
    }
}

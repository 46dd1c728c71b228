//! [`SeedClient`]: a simulator that owns its main loop talks to a `seed`
//! (or `seed-a2c`) run without being wrapped as an env — RLlib's
//! PolicyClient idea over rlfleet's SEED protocol. The model stays on the
//! learner: each call sends one observation (with the outcome of the last
//! action) and gets the action back. Blocking, one env, one QUIC session;
//! a lost connection is an error (the caller decides whether to connect
//! again). The Python package (`python/`) wraps it as `rlfleet.Client`.

use super::Refused;
use super::connect::{fresh_rng, open, server_name};
use rand::Rng;
use rlfleet_quic::{FramedStream, Liveness, Trust, client_endpoint};
use rlfleet_shared::config::WorkflowKind;
use rlfleet_shared::wire::{self, Hello, Message, Observations, Welcome, flags};
use std::time::{Duration, Instant};

/// How a [`SeedClient`] reaches its learner.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// `HOST:PORT` of the learner's QUIC listener.
    pub server: String,
    pub server_name: Option<String>,
    pub trust: Trust,
    pub token: String,
    pub actor_id: String,
    pub liveness: Liveness,
    /// How long `act` waits for the learner to assign an episode.
    pub wait_for_episode: Duration,
}

/// The run ended (the learner said stop); the text is its reason.
#[derive(Debug, thiserror::Error)]
#[error("the run ended: {0}")]
pub struct RunEnded(pub String);

/// One simulator's session with a `seed` run.
#[derive(Debug)]
pub struct SeedClient {
    rt: tokio::runtime::Runtime,
    conn: quinn::Connection,
    fs: FramedStream,
    welcome: Welcome,
    wait_for_episode: Duration,
    seq: u64,
    /// The episode the learner assigned and the simulator plays (`None`:
    /// waiting for one).
    episode: Option<u64>,
    /// The episode has begun (its first observation was sent).
    playing: bool,
    /// The learner ended the run (its reason).
    ended: Option<String>,
    pub policy_version: u64,
    /// Steps and episodes this client reported.
    pub env_steps: u64,
    pub episodes: u64,
}

impl SeedClient {
    /// Connects, says hello with one env and takes the run's welcome; a run
    /// other than `seed`/`seed-a2c` is refused (its actors need a model).
    pub fn connect(opts: &ClientOptions) -> anyhow::Result<SeedClient> {
        let rt = super::runtime()?;
        let (conn, fs, welcome) = rt.block_on(async {
            let endpoint = client_endpoint(&opts.trust, opts.liveness)?;
            let name = server_name(&opts.server, opts.server_name.as_deref());
            let (conn, mut fs) = open(
                &endpoint,
                &opts.server,
                &name,
                wire::DEFAULT_MAX_FRAME_BYTES,
            )
            .await?;
            fs.send(&Message::Hello(Hello {
                protocol: wire::PROTOCOL_VERSION,
                software: wire::SOFTWARE_VERSION.into(),
                actor_id: opts.actor_id.clone(),
                session_id: fresh_rng().random(),
                token: opts.token.clone(),
                env_capacity: 1,
                run: String::new(),
                once: false,
            }))
            .await?;
            let welcome = match fs.recv().await? {
                Some(Message::Welcome(w)) => w,
                Some(Message::Error(e)) => {
                    return Err(Refused {
                        code: e.code,
                        text: e.text,
                    }
                    .into());
                }
                Some(Message::Stop(s)) => return Err(RunEnded(s.reason).into()),
                Some(other) => anyhow::bail!("expected welcome, got {}", other.kind()),
                None => anyhow::bail!("the learner closed the stream"),
            };
            anyhow::Ok((conn, fs, welcome))
        })?;
        if !matches!(welcome.workflow, WorkflowKind::Seed | WorkflowKind::SeedA2c) {
            conn.close(0u32.into(), b"not a seed run");
            anyhow::bail!(
                "run `{}` is workflow `{}`: a client without a model joins `seed` and \
                 `seed-a2c` runs",
                welcome.run_id,
                welcome.workflow
            );
        }
        let episode = welcome.starts.first().map(|s| s.episode);
        Ok(SeedClient {
            rt,
            conn,
            fs,
            welcome,
            wait_for_episode: opts.wait_for_episode,
            seq: 0,
            episode,
            playing: false,
            ended: None,
            policy_version: 0,
            env_steps: 0,
            episodes: 0,
        })
    }

    /// The run's welcome: its id, env, observation and action sizes.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// Begins an episode with its first observation; returns the action to
    /// take. Waits (up to `wait_for_episode`) for the learner to assign
    /// one when none is.
    pub fn act(&mut self, obs: &[f32]) -> anyhow::Result<Vec<f32>> {
        self.check_obs(obs)?;
        if let Some(reason) = &self.ended {
            return Err(RunEnded(reason.clone()).into());
        }
        let t0 = Instant::now();
        while self.episode.is_none() {
            anyhow::ensure!(
                t0.elapsed() < self.wait_for_episode,
                "the learner assigned no episode within {:?}",
                self.wait_for_episode
            );
            let idle = vec![0.0; obs.len()];
            self.exchange(&idle, 0.0, flags::IDLE)?;
            if self.episode.is_none() {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        self.playing = true;
        self.exchange(obs, 0.0, flags::FRESH)
    }

    /// Reports the outcome of the last action and the next observation;
    /// returns the next action, or `None` when the episode ended (begin the
    /// next with [`SeedClient::act`]).
    pub fn step(
        &mut self,
        reward: f32,
        terminated: bool,
        truncated: bool,
        next_obs: &[f32],
    ) -> anyhow::Result<Option<Vec<f32>>> {
        anyhow::ensure!(self.playing, "no episode is in play: call act(obs) first");
        anyhow::ensure!(reward.is_finite(), "reward {reward} is not finite");
        self.check_obs(next_obs)?;
        let f =
            (u8::from(terminated) * flags::TERMINATED) | (u8::from(truncated) * flags::TRUNCATED);
        let done = terminated || truncated;
        if done {
            // The reply may already carry the next episode.
            self.episode = None;
            self.playing = false;
        }
        let reply = self.exchange(next_obs, reward, f);
        if done {
            // The learner may end the run on this very episode end: the
            // step still counts, the next `act` reports the end.
            match reply {
                Ok(_) => {}
                Err(e) => match e.downcast::<RunEnded>() {
                    Ok(RunEnded(reason)) => self.ended = Some(reason),
                    Err(e) => return Err(e),
                },
            }
            self.env_steps += 1;
            self.episodes += 1;
            return Ok(None);
        }
        let action = reply?;
        self.env_steps += 1;
        Ok(Some(action))
    }

    /// Closes the connection (the learner re-issues an episode in play).
    pub fn close(self) {
        self.conn.close(0u32.into(), b"done");
    }

    fn check_obs(&self, obs: &[f32]) -> anyhow::Result<()> {
        // With `frame_stack`, the simulator gives single frames; the
        // learner stacks them.
        let stack = self.welcome.frame_stack.max(1);
        let want = (self.welcome.obs_dim / stack) as usize;
        anyhow::ensure!(
            obs.len() == want,
            "the observation has {} values, run `{}`'s env has {want} (shape {:?}{})",
            obs.len(),
            self.welcome.run_id,
            self.welcome.obs_shape,
            if stack > 1 {
                format!(", a stack of {stack} frames")
            } else {
                String::new()
            }
        );
        if let Some(i) = obs.iter().position(|x| !x.is_finite()) {
            anyhow::bail!("observation value {i} is {} (not finite)", obs[i]);
        }
        Ok(())
    }

    /// One request and its reply: the actions, and any episode assigned.
    fn exchange(&mut self, obs: &[f32], reward: f32, f: u8) -> anyhow::Result<Vec<f32>> {
        self.seq += 1;
        let (f32s, bytes) = if self.welcome.obs_u8 {
            (Vec::new(), obs.iter().map(|&x| x as u8).collect())
        } else {
            (obs.to_vec(), Vec::new())
        };
        let req = Message::Observations(Observations {
            seq: self.seq,
            obs: f32s,
            obs_u8: bytes,
            rewards: vec![reward],
            flags: vec![f],
            faults: vec![],
        });
        let fs = &mut self.fs;
        let reply = self.rt.block_on(async {
            fs.send(&req).await?;
            anyhow::Ok(fs.recv().await?)
        })?;
        match reply {
            Some(Message::Actions(a)) => {
                self.policy_version = a.policy_version;
                if let Some(s) = a.starts.first() {
                    self.episode = Some(s.episode);
                }
                Ok(a.actions)
            }
            Some(Message::Stop(s)) => Err(RunEnded(s.reason).into()),
            Some(Message::Error(e)) => Err(Refused {
                code: e.code,
                text: e.text,
            }
            .into()),
            Some(other) => anyhow::bail!("expected actions, got {}", other.kind()),
            None => anyhow::bail!("the learner closed the stream"),
        }
    }
}

//! Building and reading a batch's [`Transitions`]: rows in, rows out,
//! observations as f32 or bytes, an episode's rows taken out.

use super::messages::Transitions;

impl Transitions {
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Appends one transition's observations, as bytes when `as_u8` (the
    /// env's uint8 values, exact), else as f32.
    pub fn push_obs(&mut self, obs: &[f32], next_obs: &[f32], as_u8: bool) {
        if as_u8 {
            self.obs_u8.extend(obs.iter().map(|&x| x as u8));
            self.next_obs_u8.extend(next_obs.iter().map(|&x| x as u8));
        } else {
            self.obs.extend_from_slice(obs);
            self.next_obs.extend_from_slice(next_obs);
        }
    }

    /// Row `i`'s observation and next observation as f32, into `obs` and
    /// `next` (`obs_dim` values each).
    pub fn obs_row(&self, i: usize, obs: &mut [f32], next: &mut [f32]) {
        let od = obs.len();
        if self.obs_u8.is_empty() {
            obs.copy_from_slice(&self.obs[i * od..(i + 1) * od]);
            next.copy_from_slice(&self.next_obs[i * od..(i + 1) * od]);
        } else {
            for (d, &x) in obs.iter_mut().zip(&self.obs_u8[i * od..(i + 1) * od]) {
                *d = f32::from(x);
            }
            for (d, &x) in next.iter_mut().zip(&self.next_obs_u8[i * od..(i + 1) * od]) {
                *d = f32::from(x);
            }
        }
    }

    /// Removes every transition of `episode` (`obs_dim` and `act_dim`
    /// values per row).
    pub fn drop_episode(&mut self, episode: u64, obs_dim: usize, act_dim: usize) {
        let keep: Vec<bool> = self.episode.iter().map(|&e| e != episode).collect();
        let rows = |v: &mut Vec<f32>, width: usize| {
            let mut i = 0;
            v.retain(|_| {
                let k = keep[i / width];
                i += 1;
                k
            });
        };
        rows(&mut self.obs, obs_dim);
        rows(&mut self.next_obs, obs_dim);
        let mut i = 0;
        self.obs_u8.retain(|_| {
            i += 1;
            keep[(i - 1) / obs_dim]
        });
        let mut i = 0;
        self.next_obs_u8.retain(|_| {
            i += 1;
            keep[(i - 1) / obs_dim]
        });
        rows(&mut self.actions, act_dim);
        rows(&mut self.rewards, 1);
        let mut i = 0;
        self.terminated.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        self.episode.retain(|&e| e != episode);
    }
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }
}

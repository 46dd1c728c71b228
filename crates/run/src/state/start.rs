//! [`Start`]: whether `learner-server run` (or `mpi`) starts a new run of
//! a config or resumes the newest unfinished one recorded under its name.

/// Which run `learner-server run` (or `mpi`) runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// A new run of the config, recorded in the state directory.
    New,
    /// The newest run of the config's name in the state directory that
    /// did not finish, from its latest checkpoint, under its id.
    ResumeLatest,
    /// `ResumeLatest` if there is such a run, else `New`: for units and job
    /// scripts that start the same command again after a crash.
    Continue,
}

impl Start {
    /// `Continue` made definite by what the state directory holds.
    pub fn settle(self, state_dir: &std::path::Path, name: &str) -> anyhow::Result<Start> {
        Ok(match self {
            Start::Continue => {
                let state = super::StateDir::open(state_dir)?;
                match state.latest_unfinished(name) {
                    Some(_) => Start::ResumeLatest,
                    None => Start::New,
                }
            }
            s => s,
        })
    }
}

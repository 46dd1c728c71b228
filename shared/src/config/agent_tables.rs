//! Which agent tables a run reads: `[dqn]` for DQN (and the probe, with
//! `[probe]`), `[ppo]` for PPO, and so on. A table for another agent set
//! to anything but its defaults is refused, as its values would be
//! ignored in silence (a `[dqn]` left in a config switched to `agent =
//! "ppo"`); the resolved config shows only the tables the run reads.

use super::{AgentKind, ConfigError, RunConfig};

/// Every agent's table, by name.
const AGENT_TABLES: [&str; 9] = [
    "dqn", "probe", "a2c", "ppo", "impala", "r2d2", "ddpg", "td3", "sac",
];

impl AgentKind {
    /// The tables this agent reads.
    pub fn tables(self) -> &'static [&'static str] {
        match self {
            AgentKind::Dqn => &["dqn"],
            AgentKind::Probe => &["dqn", "probe"],
            AgentKind::A2c => &["a2c"],
            AgentKind::Ppo => &["ppo"],
            AgentKind::Impala => &["impala"],
            AgentKind::R2d2 => &["r2d2"],
            AgentKind::Ddpg => &["ddpg"],
            AgentKind::Td3 => &["td3"],
            AgentKind::Sac => &["sac"],
        }
    }
}

impl RunConfig {
    /// Puts table `name` back to its defaults.
    fn reset_table(&mut self, name: &str) {
        match name {
            "dqn" => self.dqn = Default::default(),
            "probe" => self.probe = Default::default(),
            "a2c" => self.a2c = Default::default(),
            "ppo" => self.ppo = Default::default(),
            "impala" => self.impala = Default::default(),
            "r2d2" => self.r2d2 = Default::default(),
            "ddpg" => self.ddpg = Default::default(),
            "td3" => self.td3 = Default::default(),
            _ => self.sac = Default::default(),
        }
    }

    /// Whether table `name` holds anything but its defaults.
    fn table_set(&self, name: &str) -> bool {
        match name {
            "dqn" => self.dqn != Default::default(),
            "probe" => self.probe != Default::default(),
            "a2c" => self.a2c != Default::default(),
            "ppo" => self.ppo != Default::default(),
            "impala" => self.impala != Default::default(),
            "r2d2" => self.r2d2 != Default::default(),
            "ddpg" => self.ddpg != Default::default(),
            "td3" => self.td3 != Default::default(),
            _ => self.sac != Default::default(),
        }
    }

    /// Refuses a table of another agent that is set.
    pub(super) fn check_agent_tables(&self) -> Result<(), ConfigError> {
        let reads = self.agent.tables();
        let ignored = AGENT_TABLES
            .iter()
            .find(|t| !reads.contains(t) && self.table_set(t));
        match ignored {
            Some(t) => Err(ConfigError::Conflict(format!(
                "[{t}] sets values agent = \"{}\" never reads (it reads [{}]): remove the \
                 table, or set agent = \"{t}\" to use it",
                self.agent,
                reads.join("], [")
            ))),
            None => Ok(()),
        }
    }

    /// The same config with the agent tables the run does not read at
    /// their defaults (what [`RunConfig::to_resolved_toml`] reads back as).
    pub fn with_unread_tables_reset(&self) -> RunConfig {
        let reads = self.agent.tables();
        let mut cfg = self.clone();
        for t in AGENT_TABLES.iter().filter(|t| !reads.contains(t)) {
            cfg.reset_table(t);
        }
        cfg
    }

    /// The config with every default filled in, as TOML (written into the
    /// run's output directory), with only the agent tables the run reads.
    pub fn to_resolved_toml(&self) -> String {
        let mut table = toml::Table::try_from(self).expect("a run config always serialises");
        let reads = self.agent.tables();
        for t in AGENT_TABLES.iter().filter(|t| !reads.contains(t)) {
            table.remove(*t);
        }
        toml::to_string(&table).expect("a run config always serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = "name = \"t\"\nenv = \"CartPole-v1\"\nworkflow = \"single\"\noutput_dir = \"o\"\n\
                        [stop]\nmax_episodes = 1\n";

    #[test]
    fn a_set_table_of_another_agent_is_refused_and_the_resolved_config_omits_it() {
        let text = format!("agent = \"ppo\"\n{BASE}[dqn]\nlr = 0.01\n");
        let e = RunConfig::from_toml(&text, "t").unwrap_err().to_string();
        assert!(e.contains("[dqn]") && e.contains("agent = \"ppo\""), "{e}");
        // At its defaults (as a resolved config of an older version wrote
        // it), another agent's table is harmless.
        let text = format!("agent = \"ppo\"\n{BASE}[dqn]\nlr = 0.001\n");
        let cfg = RunConfig::from_toml(&text, "t").unwrap();
        let resolved = cfg.to_resolved_toml();
        assert!(
            resolved.contains("[ppo]") && !resolved.contains("[dqn]"),
            "{resolved}"
        );
        assert_eq!(RunConfig::from_toml(&resolved, "r").unwrap(), cfg);
        // The probe reads [dqn] (its network's shape) and [probe].
        let text =
            format!("agent = \"probe\"\n{BASE}[dqn]\nhidden = [8]\n[probe]\ntrain_every = 3\n");
        let cfg = RunConfig::from_toml(&text, "t").unwrap();
        let resolved = cfg.to_resolved_toml();
        assert!(
            resolved.contains("[dqn]") && resolved.contains("[probe]"),
            "{resolved}"
        );
    }
}

//! The rows of `episodes.csv` and `evals.csv` ([`EpisodeRecord`],
//! [`EvalRecord`]: their field names are the files' columns, an interface)
//! and how they are read back.

use super::csv_file::{format, read_csv};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One finished episode: a row of `episodes.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    /// 0-based index among the run's finished episodes.
    pub episode: u64,
    /// Which actor ran it (0 for in-process workflows).
    pub actor: u32,
    #[serde(rename = "return")]
    pub ret: f64,
    pub length: u32,
    /// Seconds since the run started (over all its sessions).
    #[serde(serialize_with = "format::millis")]
    pub wall_secs: f64,
    /// Policy version that acted at the episode's end.
    pub policy_version: u64,
    /// Env steps of the run when the episode finished.
    pub env_steps: u64,
}

/// One evaluation of published weights: a row of `evals.csv`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalRecord {
    pub env_steps: u64,
    pub policy_version: u64,
    pub mean_return: f64,
    pub min_return: f64,
    pub max_return: f64,
    #[serde(serialize_with = "format::millis")]
    pub wall_secs: f64,
    /// Episodes the mean is over.
    pub episodes: u32,
    /// A confirming evaluation (`eval.confirm_episodes`), not a screening
    /// one.
    #[serde(
        serialize_with = "format::flag",
        deserialize_with = "format::read_flag"
    )]
    pub confirming: bool,
}

/// The header of `episodes.csv` (the field names above, in order).
pub const EPISODES_HEADER: &str = "episode,actor,return,length,wall_secs,policy_version,env_steps";
/// The header of `evals.csv`.
pub const EVALS_HEADER: &str =
    "env_steps,policy_version,mean_return,min_return,max_return,wall_secs,episodes,confirming";

/// Reads `episodes.csv` back (for plots over resumed runs, the API's curve
/// after a resume, and tests).
pub fn read_episodes(path: &Path) -> std::io::Result<Vec<EpisodeRecord>> {
    read_csv(path)
}

/// Reads `evals.csv` back.
pub fn read_evals(path: &Path) -> std::io::Result<Vec<EvalRecord>> {
    read_csv(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csv_file::CsvFile;

    /// The files keep their columns, and counters past 2^53 (where f64
    /// stops holding every integer) come back exact.
    #[test]
    fn rows_round_trip_under_their_headers() {
        let dir = tempfile::tempdir().unwrap();
        let (ep, ev) = (
            dir.path().join("episodes.csv"),
            dir.path().join("evals.csv"),
        );
        let big = (1u64 << 53) + 1;
        let e = EpisodeRecord {
            episode: big,
            actor: 3,
            ret: -21.5,
            length: 7,
            wall_secs: 12.3456,
            policy_version: u64::MAX,
            env_steps: big + 2,
        };
        let v = EvalRecord {
            env_steps: big,
            policy_version: 9,
            mean_return: 500.0,
            min_return: 499.5,
            max_return: 500.0,
            wall_secs: 1.0,
            episodes: 100,
            confirming: true,
        };
        let mut w = CsvFile::open(&ep, true).unwrap();
        w.write(&e).unwrap();
        w.flush().unwrap();
        // Appending to a file that has rows adds no second header.
        let mut w = CsvFile::open(&ep, false).unwrap();
        w.write(&e).unwrap();
        w.flush().unwrap();
        let mut w = CsvFile::open(&ev, true).unwrap();
        w.write(&v).unwrap();
        w.flush().unwrap();
        let text = std::fs::read_to_string(&ep).unwrap();
        assert_eq!(text.lines().next(), Some(EPISODES_HEADER));
        assert_eq!(text.lines().count(), 3, "{text}");
        let back = read_episodes(&ep).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[1].episode, big);
        assert_eq!(back[1].env_steps, big + 2);
        assert_eq!(back[1].policy_version, u64::MAX);
        assert_eq!(back[1].wall_secs, 12.346, "seconds to the millisecond");
        let text = std::fs::read_to_string(&ev).unwrap();
        assert_eq!(text.lines().next(), Some(EVALS_HEADER));
        assert!(text.lines().nth(1).unwrap().ends_with(",100,1"), "{text}");
        assert_eq!(read_evals(&ev).unwrap(), vec![v]);
    }
}

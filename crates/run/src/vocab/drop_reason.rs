//! [`DropReason`]: why a batch that reached the learner was not trained
//! on — the reasons the run's accounts, `batches.csv` and the metrics
//! share.

/// Why a batch was not trained on (the `reason` label of
/// `rlfleet_batches_dropped_total`, the `outcome` of `batches.csv`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DropReason {
    /// Its `(actor, session, seq)` was trained before (a resend), or the
    /// agent was given every step of it already.
    Duplicate,
    /// Older than `max_policy_lag` allows.
    Stale,
    /// It failed its checks (shape, values, actor, turn).
    Invalid,
    /// It arrived after its run ended, or the run ended with it untrained.
    RunEnded,
    /// An `rma` queue or stack was full and pushed it out.
    Overflow,
    /// An `rma` buffer's newer value replaced it unread.
    Overwritten,
    /// Its steps are of an earlier play of their episode: the episode was
    /// handed out again (its actor left, or its env raised) and another
    /// play holds it now.
    Superseded,
}

impl DropReason {
    pub const ALL: [DropReason; 7] = [
        DropReason::Duplicate,
        DropReason::Stale,
        DropReason::Invalid,
        DropReason::RunEnded,
        DropReason::Overflow,
        DropReason::Overwritten,
        DropReason::Superseded,
    ];

    pub fn label(self) -> &'static str {
        match self {
            DropReason::Duplicate => "duplicate",
            DropReason::Stale => "stale",
            DropReason::Invalid => "invalid",
            DropReason::RunEnded => "run_ended",
            DropReason::Overflow => "overflow",
            DropReason::Overwritten => "overwritten",
            DropReason::Superseded => "superseded",
        }
    }
}

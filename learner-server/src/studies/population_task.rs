//! A population's task: each tick it starts members not yet started
//! (each stops itself at the generation's boundary), and, once none is
//! left running, ranks them, decides the exploits (recorded before any is
//! applied, so that a daemon killed halfway redoes the same ones), applies
//! them, and lets every member go on into the next generation.

use super::Studies;
use super::population::{Change, Exploit, MemberView, Metric, Population, PopulationRecord};
use super::store::{StudyState, cell, write_csv};
use super::transplant;
use super::{Look, RunsByName, TICK};
use rand::{Rng, SeedableRng};
use rlfleet_run::state::{RecordState, RunRecord};
use rlfleet_run::workflows::{RunOptions, StopReason};
use std::path::Path;
use std::sync::Arc;

/// Where one member is this tick.
struct Seen {
    member: u32,
    look: Look,
    env_steps: Option<u64>,
}

impl Studies {
    pub(super) async fn drive_population(self: Arc<Self>, pop: Arc<Population>) {
        loop {
            let done = match self.population_tick(&pop) {
                Ok(done) => done,
                Err(e) => {
                    tracing::error!(population = %pop.id(), "{e:#}");
                    false
                }
            };
            if done || pop.cancel.is_cancelled() {
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = pop.cancel.cancelled() => {}
            }
        }
    }

    /// One look at the population; true once every member has ended.
    fn population_tick(self: &Arc<Self>, pop: &Population) -> anyhow::Result<bool> {
        if self.hub.shutdown().is_cancelled() {
            return Ok(false);
        }
        let mut rec = pop.record.lock().expect("record lock");
        // Stopped meanwhile (the stop takes this lock): nothing starts.
        if rec.state != StudyState::Active {
            return Ok(true);
        }
        if !rec.pending.is_empty() {
            self.apply_exploits(pop, &mut rec)?;
        }
        let boundary = (u64::from(rec.generation) + 1) * rec.spec.interval_env_steps;
        let runs = RunsByName::now(&self.hub);
        let seen: Vec<Seen> = (1..=rec.spec.size)
            .map(|member| {
                let look = runs.look(&format!("{}-{member}", pop.id()));
                let env_steps = env_steps_of(&look);
                Seen {
                    member,
                    look,
                    env_steps,
                }
            })
            .collect();
        self.show_members(pop, &rec, &seen);
        let mut live = 0;
        let mut waiting = Vec::new();
        for s in &seen {
            match &s.look {
                Look::Unstarted => {
                    let m = &rec.members[s.member as usize - 1];
                    let cfg = rec
                        .spec
                        .member_cfg(&rec.root(pop.id()), pop.id(), s.member, &m.params, boundary)
                        .map_err(anyhow::Error::msg)?;
                    self.hub.start_run(cfg, RunOptions::default())?;
                    live += 1;
                }
                Look::Live(_) => live += 1,
                Look::Ended { state, record, .. }
                    if between_generations(&rec, *state, record, s.env_steps) =>
                {
                    if s.env_steps.unwrap_or(0) >= boundary {
                        waiting.push(s);
                    } else {
                        // Its generation ended before this one's boundary
                        // (the last one's, before a kill): it goes on.
                        self.continue_member(pop, &rec, s.member, record, boundary)?;
                        live += 1;
                    }
                }
                Look::Ended { .. } => {}
            }
        }
        if live > 0 {
            return Ok(false);
        }
        if waiting.is_empty() {
            rec.state = StudyState::Finished;
            pop.dir.write(&*rec)?;
            tracing::info!(population = %pop.id(), generations = rec.generation, "population finished");
            return Ok(true);
        }
        rec.pending = self.decide_exploits(pop, &rec, &seen, &waiting);
        pop.dir.write(&*rec)?;
        self.apply_exploits(pop, &mut rec)?;
        let next = boundary + rec.spec.interval_env_steps;
        for s in waiting {
            if let Look::Ended { record, .. } = &s.look {
                self.continue_member(pop, &rec, s.member, record, next)?;
            }
        }
        Ok(false)
    }

    /// Resumes a member into the generation ending at `boundary`, with its
    /// hyperparameters now.
    fn continue_member(
        self: &Arc<Self>,
        pop: &Population,
        rec: &PopulationRecord,
        member: u32,
        record: &RunRecord,
        boundary: u64,
    ) -> anyhow::Result<()> {
        let params = &rec.members[member as usize - 1].params;
        let cfg = rec
            .spec
            .member_cfg(&rec.root(pop.id()), pop.id(), member, params, boundary)
            .map_err(anyhow::Error::msg)?;
        record.write_config(&cfg)?;
        record.set_state(RecordState::Stopped, Some("between generations".into()));
        self.hub.resume_run(&record.id, None)?;
        Ok(())
    }

    /// Ranks the members that reached the boundary or finished; each
    /// waiting one of the bottom quantile copies one of the top.
    fn decide_exploits(
        &self,
        pop: &Population,
        rec: &PopulationRecord,
        seen: &[Seen],
        waiting: &[&Seen],
    ) -> Vec<Exploit> {
        let metric_of = |s: &Seen| metric(rec.spec.metric, &member_dir(rec, pop, s.member));
        let mut ranked: Vec<(&Seen, Option<f64>)> = seen
            .iter()
            .filter(|s| {
                matches!(
                    s.look,
                    Look::Ended {
                        state: RecordState::Stopped | RecordState::Finished,
                        ..
                    }
                )
            })
            .map(|s| (s, metric_of(s)))
            .collect();
        // Best first; a member with no figure yet ranks last.
        ranked.sort_by(|a, b| {
            let key = |m: Option<f64>| m.unwrap_or(f64::NEG_INFINITY);
            key(b.1)
                .total_cmp(&key(a.1))
                .then(a.0.member.cmp(&b.0.member))
        });
        let q = ((f64::from(rec.spec.size) * rec.spec.quantile) as usize)
            .max(1)
            .min(ranked.len() / 2);
        let mut rng = rand_pcg::Pcg64::seed_from_u64(
            rec.spec.seed ^ (u64::from(rec.generation) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
        );
        let top = &ranked[..q];
        let mut out = Vec::new();
        for (s, m) in &ranked[ranked.len() - q..] {
            if !waiting.iter().any(|w| w.member == s.member) {
                continue;
            }
            let (donor, dm) = top[rng.random_range(0..top.len())];
            let donor_params = &rec.members[donor.member as usize - 1].params;
            let own = &rec.members[s.member as usize - 1].params;
            let changes = rec
                .spec
                .params
                .iter()
                .map(|(key, space)| Change {
                    key: key.clone(),
                    old: own.get(key).cloned().unwrap_or_default(),
                    new: space.perturb(
                        donor_params.get(key).unwrap_or(&serde_json::Value::Null),
                        rec.spec.resample_probability,
                        &mut rng,
                    ),
                })
                .collect();
            out.push(Exploit {
                generation: rec.generation + 1,
                env_steps: s.env_steps.unwrap_or(0),
                member: s.member,
                member_run: s.look.run_id().unwrap_or_default().to_string(),
                donor: donor.member,
                donor_run: donor.look.run_id().unwrap_or_default().to_string(),
                member_metric: *m,
                donor_metric: dm,
                donor_checkpoint: String::new(),
                donor_env_steps: donor.env_steps.unwrap_or(0),
                changes,
            });
        }
        out
    }

    /// Applies the recorded exploits (again, after a crash: each gives the
    /// same files), then closes the generation.
    fn apply_exploits(&self, pop: &Population, rec: &mut PopulationRecord) -> anyhow::Result<()> {
        let state = self
            .hub
            .state
            .as_ref()
            .expect("populations need a state directory");
        let kept = pop.dir.dir.join("exploits");
        let mut done = Vec::new();
        for mut e in std::mem::take(&mut rec.pending) {
            let (Some(donor), Some(member)) =
                (state.record(&e.donor_run), state.record(&e.member_run))
            else {
                tracing::warn!(population = %pop.id(), member = e.member, "exploit skipped: a run is not recorded");
                continue;
            };
            let (from, counters) = transplant::latest(&donor)?;
            let (to, own) = transplant::latest(&member)?;
            let tag = format!("g{}-m{}", e.generation, e.member);
            transplant::keep(&from, &kept, &format!("{tag}-donor.safetensors"))?;
            transplant::transplant(&from, &to)?;
            transplant::keep(&to, &kept, &format!("{tag}.safetensors"))?;
            let params = &mut rec.members[e.member as usize - 1].params;
            for c in &e.changes {
                params.insert(c.key.clone(), c.new.clone());
            }
            e.donor_checkpoint = from
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            e.donor_env_steps = counters.env_steps;
            e.env_steps = own.env_steps;
            self.hub
                .metrics()
                .pbt_exploits
                .with_label_values(&[pop.id()])
                .inc();
            tracing::info!(population = %pop.id(), member = e.member, donor = e.donor, generation = e.generation, "exploit: copied the donor and perturbed");
            done.push(e);
        }
        rec.lineage.extend(done);
        rec.generation += 1;
        pop.dir.write(&*rec)?;
        write_population_csv(&pop.csv_path(rec), rec)?;
        Ok(())
    }

    /// What `GET /v1/populations/{id}` shows of the members.
    fn show_members(&self, pop: &Population, rec: &PopulationRecord, seen: &[Seen]) {
        let views = seen
            .iter()
            .map(|s| MemberView {
                member: s.member,
                run_id: s.look.run_id().map(str::to_string),
                state: match &s.look {
                    Look::Unstarted => "pending".into(),
                    Look::Live(st) => super::state_name(st.state),
                    Look::Ended { state, .. } => serde_json::to_value(state)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default(),
                },
                env_steps: s.env_steps,
                metric: metric(rec.spec.metric, &member_dir(rec, pop, s.member)),
                params: rec.members[s.member as usize - 1].params.clone(),
            })
            .collect();
        *pop.members.lock().expect("members lock") = views;
    }
}

/// Whether an ended member is between two generations (it stopped at a
/// generation's boundary, or was stopped on its way to one), not done.
fn between_generations(
    rec: &PopulationRecord,
    state: RecordState,
    record: &RunRecord,
    env_steps: Option<u64>,
) -> bool {
    let at_limit = || {
        record
            .info()
            .is_ok_and(|i| i.reason.as_deref() == Some(&StopReason::MaxEnvSteps.to_string()))
    };
    match state {
        RecordState::Stopped => true,
        RecordState::Finished => at_limit() && !rec.spec.budget_spent(env_steps.unwrap_or(0)),
        _ => false,
    }
}

/// A member's env steps: its status, else its latest checkpoint's (from
/// the file's name: this runs every tick).
fn env_steps_of(look: &Look) -> Option<u64> {
    match look {
        Look::Unstarted => None,
        Look::Live(s) => Some(s.env_steps),
        Look::Ended {
            status: Some(s), ..
        } => Some(s.env_steps),
        Look::Ended { record, .. } => record.latest_checkpoint_env_steps(),
    }
}

/// Member `n`'s output directory.
fn member_dir(rec: &PopulationRecord, pop: &Population, n: u32) -> std::path::PathBuf {
    rec.root(pop.id()).join(n.to_string())
}

/// A member's metric from its output files.
fn metric(kind: Metric, dir: &Path) -> Option<f64> {
    match kind {
        Metric::EvalMean => rlfleet_output::read_evals(&dir.join("evals.csv"))
            .ok()?
            .last()
            .map(|e| e.mean_return),
        Metric::TrainMean => {
            let eps = rlfleet_output::read_episodes(&dir.join("episodes.csv")).ok()?;
            let last = &eps[eps.len().saturating_sub(20)..];
            (!last.is_empty()).then(|| last.iter().map(|e| e.ret).sum::<f64>() / last.len() as f64)
        }
    }
}

/// `population.csv`: the lineage, one row per exploit.
fn write_population_csv(path: &Path, rec: &PopulationRecord) -> std::io::Result<()> {
    let keys: Vec<&String> = rec.spec.params.keys().collect();
    let mut header: Vec<String> = [
        "generation",
        "env_steps",
        "member",
        "member_run",
        "donor",
        "donor_run",
        "member_metric",
        "donor_metric",
        "donor_checkpoint",
        "donor_env_steps",
    ]
    .map(String::from)
    .to_vec();
    for k in &keys {
        header.push(format!("{k}_old"));
        header.push(format!("{k}_new"));
    }
    let rows: Vec<Vec<String>> = rec
        .lineage
        .iter()
        .map(|e| {
            let mut r = vec![
                e.generation.to_string(),
                e.env_steps.to_string(),
                e.member.to_string(),
                e.member_run.clone(),
                e.donor.to_string(),
                e.donor_run.clone(),
                cell(e.member_metric),
                cell(e.donor_metric),
                e.donor_checkpoint.clone(),
                e.donor_env_steps.to_string(),
            ];
            for k in &keys {
                let c = e.changes.iter().find(|c| &&c.key == k);
                r.push(c.map(|c| c.old.to_string()).unwrap_or_default());
                r.push(c.map(|c| c.new.to_string()).unwrap_or_default());
            }
            r
        })
        .collect();
    write_csv(path, &header, &rows)
}

//! The progress bar of an embedded run (indicatif, on stderr; hidden when
//! stderr is not a terminal or progress is off).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Shows env steps against the step limit (or a spinner) and a status line.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    pub fn new(enabled: bool, max_env_steps: Option<u64>, start: u64) -> Progress {
        let bar = match max_env_steps {
            Some(n) => ProgressBar::new(n),
            None => ProgressBar::no_length(),
        };
        if !enabled {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        let template = if max_env_steps.is_some() {
            "{elapsed_precise} [{bar:30.cyan/blue}] {pos}/{len} steps  {msg}"
        } else {
            "{elapsed_precise} {spinner} {pos} steps  {msg}"
        };
        bar.set_style(
            ProgressStyle::with_template(template)
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_position(start);
        Progress { bar }
    }

    pub fn update(
        &self,
        env_steps: u64,
        episodes: u64,
        steps_per_sec: f64,
        recent: Option<f64>,
        eval: Option<f64>,
    ) {
        self.bar.set_position(env_steps);
        let fmt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
        self.bar.set_message(format!(
            "ep {episodes} | {steps_per_sec:.0} steps/s | return(20) {} | eval {}",
            fmt(recent),
            fmt(eval)
        ));
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

//! The progress bar of an embedded run (indicatif, on stderr; hidden when
//! stderr is not a terminal or progress is off).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Where the stop rule's confirming evaluation stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Confirm {
    None,
    UnderWay,
    /// The latest confirming evaluation's mean return.
    Latest(f64),
}

/// What the progress bar shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProgressLine {
    pub env_steps: u64,
    pub episodes: u64,
    pub steps_per_sec: f64,
    pub recent: Option<f64>,
    pub eval: Option<f64>,
    pub confirm: Confirm,
}

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

    /// `confirm`: the stop rule's confirming evaluation — under way, or
    /// the latest one's mean — when there has been one.
    pub fn update(&self, line: &ProgressLine) {
        let ProgressLine {
            env_steps,
            episodes,
            steps_per_sec,
            recent,
            eval,
            confirm,
        } = *line;
        self.bar.set_position(env_steps);
        let fmt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1}"));
        let confirm = match confirm {
            Confirm::None => String::new(),
            Confirm::UnderWay => " | confirming".into(),
            Confirm::Latest(m) => format!(" | confirmed {m:.1}"),
        };
        self.bar.set_message(format!(
            "ep {episodes} | {steps_per_sec:.0} steps/s | return(20) {} | eval {}{confirm}",
            fmt(recent),
            fmt(eval)
        ));
    }

    #[cfg(test)]
    pub fn message(&self) -> String {
        self.bar.message()
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_line_shows_the_confirming_evaluation() {
        let p = Progress::new(false, Some(1000), 0);
        p.update(&ProgressLine {
            env_steps: 500,
            episodes: 7,
            steps_per_sec: 1234.0,
            recent: Some(21.5),
            eval: Some(480.0),
            confirm: Confirm::None,
        });
        assert_eq!(
            p.message(),
            "ep 7 | 1234 steps/s | return(20) 21.5 | eval 480.0"
        );
        p.update(&ProgressLine {
            env_steps: 600,
            episodes: 8,
            steps_per_sec: 1234.0,
            recent: Some(21.5),
            eval: Some(480.0),
            confirm: Confirm::UnderWay,
        });
        assert!(
            p.message().ends_with("eval 480.0 | confirming"),
            "{}",
            p.message()
        );
        p.update(&ProgressLine {
            env_steps: 700,
            episodes: 9,
            steps_per_sec: 1234.0,
            recent: None,
            eval: Some(480.0),
            confirm: Confirm::Latest(466.3),
        });
        assert!(
            p.message()
                .ends_with("| return(20) - | eval 480.0 | confirmed 466.3"),
            "{}",
            p.message()
        );
    }
}

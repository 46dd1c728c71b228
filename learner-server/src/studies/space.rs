//! A hyperparameter's space in a sweep or a population: a list of values,
//! or a range (`min`, `max`, `log`) that a sweep cuts into `count` points
//! and a population samples from; and how a population member's value is
//! perturbed (×0.8 or ×1.2, or drawn again).

use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One parameter's space, keyed by its config key path (`dqn.lr`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Space {
    /// These values, in order.
    Values(Vec<Value>),
    /// From `min` to `max`; evenly spaced in the logarithm with `log`.
    Range(Range),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Range {
    pub min: f64,
    pub max: f64,
    /// Points of a sweep's grid, ends included (populations sample).
    #[serde(default)]
    pub count: Option<u32>,
    #[serde(default)]
    pub log: bool,
}

/// The parameters, by key path, in key order.
pub type Params = BTreeMap<String, Space>;

/// The most points one parameter's range may be cut into.
pub const MAX_POINTS: u32 = 1_000;

impl Space {
    /// Errors unless the space is usable; `grid`: a sweep's (a range needs
    /// `count`).
    pub fn check(&self, key: &str, grid: bool) -> Result<(), String> {
        match self {
            Space::Values(v) if v.is_empty() => Err(format!("`{key}`: no values")),
            Space::Values(v) if v.len() > MAX_POINTS as usize => {
                Err(format!("`{key}`: more than {MAX_POINTS} values"))
            }
            Space::Values(_) => Ok(()),
            Space::Range(r) => {
                if !(r.min.is_finite() && r.max.is_finite() && r.min <= r.max) {
                    return Err(format!("`{key}`: a range needs finite min <= max"));
                }
                if r.log && r.min <= 0.0 {
                    return Err(format!("`{key}`: a log range needs min > 0"));
                }
                match r.count {
                    None if grid => Err(format!(
                        "`{key}`: a sweep's range needs `count` (its points, ends included)"
                    )),
                    Some(c) if !(1..=MAX_POINTS).contains(&c) => {
                        Err(format!("`{key}`: count must be in 1..={MAX_POINTS}"))
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    /// A sweep's points for this parameter.
    pub fn points(&self) -> Vec<Value> {
        match self {
            Space::Values(v) => v.clone(),
            Space::Range(r) => {
                let n = r.count.unwrap_or(1).max(1);
                (0..n)
                    .map(|i| {
                        let t = if n == 1 {
                            0.0
                        } else {
                            f64::from(i) / f64::from(n - 1)
                        };
                        number(r.at(t))
                    })
                    .collect()
            }
        }
    }

    /// A value drawn from the space.
    pub fn sample(&self, rng: &mut impl Rng) -> Value {
        match self {
            Space::Values(v) => v[rng.random_range(0..v.len())].clone(),
            Space::Range(r) => number(r.at(rng.random::<f64>())),
        }
    }

    /// A member's next value: drawn again with probability `resample`,
    /// else `old` times 0.8 or 1.2 (a list's neighbour one place down or
    /// up), kept inside a range.
    pub fn perturb(&self, old: &Value, resample: f64, rng: &mut impl Rng) -> Value {
        if rng.random::<f64>() < resample {
            return self.sample(rng);
        }
        let up = rng.random::<bool>();
        match self {
            Space::Values(v) => {
                let i = v.iter().position(|x| x == old).unwrap_or(0);
                let j = if up {
                    (i + 1).min(v.len() - 1)
                } else {
                    i.saturating_sub(1)
                };
                v[j].clone()
            }
            Space::Range(r) => {
                let x = old.as_f64().unwrap_or(r.min) * if up { 1.2 } else { 0.8 };
                number(x.clamp(r.min, r.max))
            }
        }
    }
}

impl Range {
    /// The point a fraction `t` of the way from `min` to `max`.
    fn at(&self, t: f64) -> f64 {
        if self.log {
            (self.min.ln() + t * (self.max.ln() - self.min.ln())).exp()
        } else {
            self.min + t * (self.max - self.min)
        }
    }
}

/// A float as a JSON number.
fn number(x: f64) -> Value {
    serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)
}

/// Every combination of the parameters' points, in key order (the last
/// key varying fastest).
pub fn grid(params: &Params) -> Vec<Vec<(String, Value)>> {
    let mut out = vec![Vec::new()];
    for (key, space) in params {
        let points = space.points();
        out = out
            .into_iter()
            .flat_map(|combo| {
                points.iter().map(move |p| {
                    let mut c = combo.clone();
                    c.push((key.clone(), p.clone()));
                    c
                })
            })
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use serde_json::json;

    fn range(min: f64, max: f64, count: Option<u32>, log: bool) -> Space {
        Space::Range(Range {
            min,
            max,
            count,
            log,
        })
    }

    #[test]
    fn a_grid_takes_every_combination_in_key_order() {
        let mut p = Params::new();
        p.insert("dqn.lr".into(), range(1e-4, 1e-2, Some(3), true));
        p.insert(
            "dqn.batch_size".into(),
            Space::Values(vec![json!(32), json!(64)]),
        );
        let g = grid(&p);
        assert_eq!(g.len(), 6);
        assert_eq!(g[0][0], ("dqn.batch_size".to_string(), json!(32)));
        let lrs: Vec<f64> = g[..3].iter().map(|c| c[1].1.as_f64().unwrap()).collect();
        for (got, want) in lrs.iter().zip([1e-4, 1e-3, 1e-2]) {
            assert!((got / want - 1.0).abs() < 1e-9, "{lrs:?}");
        }
        assert_eq!(grid(&Params::new()), vec![Vec::new()]);
    }

    #[test]
    fn spaces_are_checked() {
        assert!(range(1.0, 2.0, None, false).check("k", true).is_err());
        assert!(range(1.0, 2.0, None, false).check("k", false).is_ok());
        assert!(range(0.0, 2.0, Some(2), true).check("k", true).is_err());
        assert!(range(3.0, 2.0, Some(2), false).check("k", true).is_err());
        assert!(Space::Values(vec![]).check("k", true).is_err());
    }

    #[test]
    fn perturbation_scales_or_steps_and_stays_inside() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(3);
        let r = range(1e-4, 1e-2, None, true);
        for _ in 0..50 {
            let v = r.perturb(&json!(1e-3), 0.0, &mut rng).as_f64().unwrap();
            assert!(
                (v - 8e-4).abs() < 1e-12 || (v - 1.2e-3).abs() < 1e-12,
                "{v}"
            );
            let s = r.perturb(&json!(1e-3), 1.0, &mut rng).as_f64().unwrap();
            assert!((1e-4..=1e-2).contains(&s));
        }
        assert!(r.perturb(&json!(1e-2), 0.0, &mut rng).as_f64().unwrap() <= 1e-2);
        let l = Space::Values(vec![json!(16), json!(32), json!(64)]);
        for _ in 0..20 {
            let v = l.perturb(&json!(32), 0.0, &mut rng);
            assert!(v == json!(16) || v == json!(64), "{v}");
        }
    }
}

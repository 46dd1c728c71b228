//! V-trace against the published formula: rlfleet's targets and
//! policy-gradient advantages (`agents::vtrace`, a backward recursion in
//! f32) against `tests/python/vtrace_reference.py` (the paper's sum,
//! written out in numpy float64), on fixed unrolls with clipping active
//! (importance weights from 0.05 to 20 against ρ̄ = 1, c̄ = 0.9, λ = 0.95)
//! and episode ends inside the unroll (discount 0 after a terminal step),
//! to 1e-6 relative.

use rlfleet_learning::agents::vtrace::{Clipping, vtrace};
use rlfleet_tests::{reference_python, run_with_input, workspace_root};
use serde_json::{Value, json};

/// One unroll of `n` steps; the episode ends after the steps in `ends`.
fn case(n: usize, ends: &[usize], seed: u64) -> (Vec<[f32; 4]>, f32, Clipping) {
    let mut x = seed;
    let mut next = || {
        // A small LCG: fixed, platform-independent inputs.
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((x >> 33) as f32) / (1u64 << 31) as f32
    };
    let steps = (0..n)
        .map(|t| {
            // log ρ in [-3, 3]: ρ from 0.05 to 20.
            let log_rho = 6.0 * next() - 3.0;
            let discount = if ends.contains(&t) { 0.0 } else { 0.97 };
            [log_rho, discount, 2.0 * next() - 0.5, 4.0 * next() - 2.0]
        })
        .collect();
    let clip = Clipping {
        rho_bar: 1.0,
        c_bar: 0.9,
        lambda: 0.95,
    };
    (steps, 1.5, clip)
}

#[test]
fn vtrace_matches_the_published_formula_in_numpy() {
    let cases = [
        case(12, &[], 1),
        case(20, &[4, 13], 2),
        case(7, &[6], 3),
        case(1, &[], 4),
    ];
    let request = json!({
        "cases": cases.iter().map(|(steps, bootstrap, clip)| {
            let col = |k: usize| steps.iter().map(|s| f64::from(s[k])).collect::<Vec<_>>();
            json!({
                "log_rhos": col(0), "discounts": col(1), "rewards": col(2), "values": col(3),
                "bootstrap": bootstrap, "rho_bar": clip.rho_bar, "c_bar": clip.c_bar,
                "lambda": clip.lambda,
            })
        }).collect::<Vec<_>>()
    });
    let script = workspace_root().join("tests/python/vtrace_reference.py");
    let out = run_with_input(
        std::process::Command::new(reference_python()).arg(&script),
        request.to_string().as_bytes(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut clipped = 0;
    for (k, (steps, bootstrap, clip)) in cases.iter().enumerate() {
        let col = |i: usize| steps.iter().map(|s| s[i]).collect::<Vec<f32>>();
        let got = vtrace(&col(0), &col(1), &col(2), &col(3), *bootstrap, *clip);
        clipped += got.rhos.iter().filter(|&&r| r > clip.rho_bar).count();
        let want = &reference["cases"][k];
        for (name, mine) in [("vs", &got.vs), ("pg_advantages", &got.pg_advantages)] {
            let theirs: Vec<f64> = want[name]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            assert_eq!(mine.len(), theirs.len());
            for (s, (&a, &b)) in mine.iter().zip(&theirs).enumerate() {
                let err = (f64::from(a) - b).abs() / b.abs().max(1.0);
                assert!(
                    err < 1e-6,
                    "case {k} {name}[{s}]: {a} against {b} ({err:e})"
                );
            }
        }
    }
    assert!(
        clipped >= 10,
        "clipping is exercised: {clipped} weights above rho_bar"
    );
}

"""V-trace by the published formula, for rlfleet's V-trace test.

Espeholt et al. 2018 ("IMPALA"), equation (1), written as the sum it is,
not as rlfleet's backward recursion:

    v_s = V(x_s) + sum_{t=s}^{n-1} (prod_{i=s}^{t-1} gamma_i c_i) delta_t V
    delta_t V = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t))
    rho_t = min(rho_bar, pi/mu),  c_i = lambda * min(c_bar, pi/mu)

with gamma_t the discount after step t (0 where an episode ended at t) and
V(x_n) the bootstrap value; the policy-gradient advantage is
min(rho_bar, pi/mu) (r_s + gamma_s v_{s+1} - V(x_s)), v_n being the
bootstrap. Computed in float64.

Reads one JSON request from stdin: {"cases": [{"log_rhos", "discounts",
"rewards", "values", "bootstrap", "rho_bar", "c_bar", "lambda"}, ...]};
writes {"cases": [{"vs": [...], "pg_advantages": [...]}, ...]}.
"""

import json
import sys

import numpy as np


def vtrace(case):
    log_rhos = np.asarray(case["log_rhos"], dtype=np.float64)
    gammas = np.asarray(case["discounts"], dtype=np.float64)
    rewards = np.asarray(case["rewards"], dtype=np.float64)
    values = np.asarray(case["values"], dtype=np.float64)
    bootstrap = float(case["bootstrap"])
    n = len(rewards)
    ratio = np.exp(log_rhos)
    rho = np.minimum(case["rho_bar"], ratio)
    c = case["lambda"] * np.minimum(case["c_bar"], ratio)
    next_values = np.append(values[1:], bootstrap)
    delta = rho * (rewards + gammas * next_values - values)
    vs = np.empty(n)
    for s in range(n):
        total, trace = 0.0, 1.0
        for t in range(s, n):
            total += trace * delta[t]
            trace *= gammas[t] * c[t]
        vs[s] = values[s] + total
    next_vs = np.append(vs[1:], bootstrap)
    pg = rho * (rewards + gammas * next_vs - values)
    return {"vs": vs.tolist(), "pg_advantages": pg.tolist()}


def main():
    request = json.load(sys.stdin)
    json.dump({"cases": [vtrace(c) for c in request["cases"]]}, sys.stdout)


if __name__ == "__main__":
    main()

"""rlfleet.Control against a daemon: submit, show, list, stop and resume a
run, submit, show and stop a sweep, and an error answer raised.

    control.py API TOKEN RUN.toml SWEEP.toml

Prints one JSON object of what it saw.
"""

import json
import sys
import time

import rlfleet

api, token, run_toml, sweep_toml = sys.argv[1:5]
c = rlfleet.Control(api, token=token)
seen = {}
rid = c.submit_run(run_toml)
seen["run_id"] = rid
seen["running"] = [r["id"] for r in c.runs(state="running")]
c.stop_run(rid)
for _ in range(600):
    if c.run(rid)["state"] == "finished":
        break
    time.sleep(0.05)
c.resume_run(rid)
seen["resumed"] = c.run(rid)["state"]
c.stop_run(rid)
sid = c.submit_sweep(sweep_toml)
seen["sweep_id"] = sid
seen["sweeps"] = [s["id"] for s in c.sweeps()]
seen["trials"] = len(c.sweep(sid)["trials"])
c.stop_sweep(sid)
seen["populations"] = c.populations()
try:
    c.run("no-such-run")
    seen["error"] = None
except RuntimeError as e:
    seen["error"] = str(e)
print(json.dumps(seen))

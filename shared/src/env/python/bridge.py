"""rlfleet's side of the Gymnasium bridge, loaded into the embedded interpreter.

The Rust side (`rlfleet_shared::env::python`) calls these functions with the
GIL held and nothing else: every conversion between Gymnasium's values and
rlfleet's flat float32 buffers happens here, in one place.
"""

import ast
import importlib
import inspect
import json
import sys
import traceback

import numpy as np

# Namespaced Gymnasium ids: the package that registers them on import, or
# (`module:function`) the function that registers them.
_NAMESPACES = {"ALE": "ale_py", "MinAtar": "minatar.gym:register_envs"}


def _load(path):
    """Resolves `module:attr` (attr may be dotted)."""
    module, sep, attr = path.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"`{path}` is not of the form `module:attr`")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def add_path(entry):
    if entry not in sys.path:
        sys.path.insert(0, entry)


def _takes_comm(constructor):
    """Whether `constructor` names a `comm` parameter."""
    try:
        return "comm" in inspect.signature(constructor).parameters
    except (TypeError, ValueError):
        return False


class EnvAbandoned(Exception):
    """Raised in an env's collective when another rank of its group
    raised: the group gives up on the call and rebuilds the env."""


# Fortran handle -> the GroupComm an env was given.
_GROUP_COMMS = {}
# Blocking collectives of mpi4py's buffer API whose calls can be
# abandoned (each runs as its non-blocking twin, `I` + name).
_ABANDONABLE = (
    "Barrier", "Bcast", "Reduce", "Allreduce", "Gather", "Gatherv", "Allgather",
    "Allgatherv", "Scatter", "Scatterv", "Alltoall", "Alltoallv", "Reduce_scatter",
    "Reduce_scatter_block", "Scan", "Exscan",
)
_GROUP_COMM_CLASS = []


def _group_comm_class():
    """mpi4py's Intracomm whose buffer collectives can be abandoned."""
    if _GROUP_COMM_CLASS:
        return _GROUP_COMM_CLASS[0]
    import time

    from mpi4py import MPI

    def abandonable(name):
        start = getattr(MPI.Intracomm, "I" + name.lower())

        def call(self, *args, **kwargs):
            request = start(self, *args, **kwargs)
            spins = 0
            while not request.Test():
                if self.abandoned:
                    raise EnvAbandoned(f"{name}: another rank of the env group raised")
                spins += 1
                if spins > 100:
                    time.sleep(50e-6)

        call.__name__ = name
        call.__doc__ = f"`{name}`, given up when another rank of the env group raises."
        return call

    attrs = {"abandoned": False}
    attrs.update({name: abandonable(name) for name in _ABANDONABLE})
    cls = type("GroupComm", (MPI.Intracomm,), attrs)
    _GROUP_COMM_CLASS.append(cls)
    return cls


def _group_comm(handle):
    """The env group's communicator as mpi4py's (its Fortran handle)."""
    from mpi4py import MPI

    comm = _group_comm_class()(MPI.Intracomm.f2py(handle))
    _GROUP_COMMS[handle] = comm
    return comm


def abandon_comm(handle):
    comm = _GROUP_COMMS.get(handle)
    if comm is not None:
        comm.abandoned = True


def make(source, kwargs_json, wrappers, comm_handle=None):
    """Builds an env from `gymnasium:ID` or `python:module:attr`; with
    `comm_handle` (an MPI env group), a constructor that takes `comm`
    gets the group's communicator."""
    kwargs = json.loads(kwargs_json) if kwargs_json else {}
    kind, _, target = source.partition(":")
    if kind == "gymnasium":
        import gymnasium

        namespace = target.split("/", 1)[0] if "/" in target else None
        if namespace in _NAMESPACES:
            registers = _NAMESPACES[namespace]
            if ":" not in registers:
                gymnasium.register_envs(importlib.import_module(registers))
            elif not any(k.startswith(namespace + "/") for k in gymnasium.registry):
                _load(registers)()
        if comm_handle is not None:
            entry = gymnasium.spec(target).entry_point
            constructor = _load(entry) if isinstance(entry, str) else entry
            if _takes_comm(constructor):
                kwargs["comm"] = _group_comm(comm_handle)
        env = gymnasium.make(target, **kwargs)
    elif kind == "python":
        constructor = _load(target)
        if comm_handle is not None and _takes_comm(constructor):
            kwargs["comm"] = _group_comm(comm_handle)
        env = constructor(**kwargs)
    else:
        raise ValueError(f"unknown env source `{kind}`")
    for w in wrappers:
        path, wrapper_kwargs = _call(w)
        env = _load(path)(env, **wrapper_kwargs)
    return env


def _call(spec):
    """Splits `module:attr` or `module:attr(key=value, ...)` (keyword
    arguments only, their values Python literals) into the path and the
    keyword arguments."""
    path, paren, rest = spec.partition("(")
    if not paren:
        return spec, {}
    if not rest.endswith(")"):
        raise ValueError(f"`{spec}` is not of the form `module:attr(key=value, ...)`")
    call = ast.parse(f"f({rest}", mode="eval").body
    if call.args:
        raise ValueError(f"`{spec}`: give wrapper arguments by keyword")
    try:
        return path.strip(), {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    except ValueError as e:
        raise ValueError(f"`{spec}`: wrapper arguments must be Python literals ({e})") from None


def _finite_or_none(bound):
    """A bound as a list for JSON, infinities as None."""
    flat = np.asarray(bound, dtype=np.float64).ravel()
    return [float(x) if np.isfinite(x) else None for x in flat]


def _space(space, role):
    """Describes a space as a dict the Rust side reads, or raises naming it."""
    import gymnasium.spaces as S

    if isinstance(space, S.Discrete):
        return {"kind": "discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, S.Box):
        dtype = np.dtype(space.dtype)
        if role == "action" and dtype.kind != "f":
            raise TypeError(
                f"action space {space} has dtype {dtype}; rlfleet supports Discrete "
                "and float Box action spaces"
            )
        if role == "observation" and dtype not in (np.float32, np.float64, np.uint8, np.bool_):
            raise TypeError(
                f"observation space {space} has dtype {dtype}; rlfleet supports Box "
                "observations of float32, float64, uint8 or bool, and Discrete"
            )
        return {
            "kind": "box",
            "shape": [int(d) for d in space.shape],
            "dtype": {np.dtype(np.uint8): "uint8", np.dtype(np.bool_): "bool"}.get(dtype, str(dtype)),
            "low": _finite_or_none(space.low),
            "high": _finite_or_none(space.high),
        }
    supported = (
        "Discrete and float Box"
        if role == "action"
        else "Box (float32, float64, uint8 or bool) and Discrete (one-hot)"
    )
    raise TypeError(
        f"{role} space {type(space).__name__} ({space}) is not supported; rlfleet "
        f"supports {supported} {role} spaces (flatten it with a wrapper such as "
        "gymnasium.wrappers:FlattenObservation)"
    )


def describe(env):
    """The spec of a built env: spaces, time limit, reward threshold."""
    spec = getattr(env, "spec", None)
    return {
        "observation": _space(env.observation_space, "observation"),
        "action": _space(env.action_space, "action"),
        "max_episode_steps": getattr(spec, "max_episode_steps", None),
        "reward_threshold": getattr(spec, "reward_threshold", None),
    }


class Stepper:
    """Wraps one env: flat float32 observations in, Gymnasium actions out."""

    def __init__(self, env):
        self.env = env
        obs_space = env.observation_space
        act_space = env.action_space
        import gymnasium.spaces as S

        self.one_hot = obs_space.n if isinstance(obs_space, S.Discrete) else None
        self.obs_start = int(obs_space.start) if self.one_hot else 0
        if isinstance(act_space, S.Discrete):
            self.act_start = int(act_space.start)
            self.act_shape = None
        else:
            self.act_start = 0
            self.act_shape = act_space.shape
            self.act_dtype = act_space.dtype
        self.buf = None

    def _obs(self, obs):
        if self.one_hot is not None:
            out = np.zeros(self.one_hot, dtype=np.float32)
            out[int(obs) - self.obs_start] = 1.0
            return out
        return np.ascontiguousarray(obs, dtype=np.float32).reshape(-1)

    def reset(self, seed):
        obs, _info = self.env.reset(seed=seed)
        return self._obs(obs)

    def step_discrete(self, action):
        obs, reward, terminated, truncated, _info = self.env.step(action + self.act_start)
        return self._obs(obs), float(reward), bool(terminated), bool(truncated)

    def step_box(self, flat):
        action = np.asarray(flat, dtype=self.act_dtype).reshape(self.act_shape)
        obs, reward, terminated, truncated, _info = self.env.step(action)
        return self._obs(obs), float(reward), bool(terminated), bool(truncated)

    def get_state(self):
        """The physical state, where the env keeps it as `state` (the
        classic-control envs do)."""
        return [float(x) for x in np.asarray(self.env.unwrapped.state, dtype=np.float64).ravel()]

    def set_state(self, values):
        self.env.unwrapped.state = np.asarray(values, dtype=np.float64)

    def close(self):
        try:
            self.env.close()
        except Exception:
            pass


def fault(exc, tb=None):
    """`Type: message (at file:line in function)` for an exception."""
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(tb if tb is not None else exc.__traceback__)
    if frames:
        last = frames[-1]
        text += f" (at {last.filename}:{last.lineno} in {last.name})"
    return text


def describe_json(env):
    return json.dumps(describe(env))

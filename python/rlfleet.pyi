"""Type stubs of the rlfleet module (a Rust extension built with maturin).

Kept beside ``pyproject.toml`` so that maturin puts it, and ``py.typed``,
into the wheel; the test suite checks an example against it with
``mypy --strict``.
"""

from collections.abc import Callable, Mapping
from os import PathLike
from typing import Any

# A discrete action (int) or a continuous one (floats); the names with an
# underscore exist only here, not in the module.
_Action = int | list[float]

class RunEndedError(RuntimeError):
    """The learner ended the run."""

class Client:
    """A simulator's session with a ``seed`` run of a learner.

    ``server``, ``pin``/``ca``, ``token`` and ``server_name`` default to
    ``RLFLEET_SERVER``, ``RLFLEET_PIN``/``RLFLEET_CA``, ``RLFLEET_TOKEN``
    and ``RLFLEET_SERVER_NAME``.
    """

    def __init__(
        self,
        server: str | None = None,
        pin: str | None = None,
        ca: str | None = None,
        token: str | None = None,
        actor_id: str | None = None,
        server_name: str | None = None,
        wait_secs: float = 600.0,
    ) -> None: ...
    def act(self, obs: Any) -> _Action:
        """Begins an episode with its first observation; returns the action."""
    def step(
        self, reward: float, terminated: bool, truncated: bool, next_obs: Any
    ) -> _Action | None:
        """Reports the outcome and the next observation; the next action,
        or None when the episode ended."""
    def close(self) -> None: ...
    @property
    def run_id(self) -> str: ...
    @property
    def policy_version(self) -> int: ...
    @property
    def episodes(self) -> int: ...
    @property
    def env_steps(self) -> int: ...
    @property
    def observation_shape(self) -> list[int]: ...

def run_actor(
    server: str | None,
    env_factory: Callable[[], Any],
    n_envs: int = 1,
    pin: str | None = None,
    ca: str | None = None,
    token: str | None = None,
    actor_id: str | None = None,
    server_name: str | None = None,
    once: bool = True,
    give_up_secs: float = 600.0,
    reply_timeout_secs: float = 600.0,
) -> str:
    """Runs an actor whose envs ``env_factory()`` builds until the run
    ends; returns the actor's report line."""

# A run config or a study's spec: a TOML file's path, or its content as a
# dict.
_Config = str | PathLike[str] | Mapping[str, Any]

class Control:
    """The daemon's control API (``api`` defaults to ``RLFLEET_API``, else
    ``http://127.0.0.1:8080``; ``token`` to ``RLFLEET_API_TOKEN``)."""

    def __init__(self, api: str | None = None, token: str | None = None) -> None: ...
    def submit_run(self, config: _Config) -> str: ...
    def runs(self, state: str | None = None) -> list[dict[str, Any]]: ...
    def run(self, id: str) -> dict[str, Any]: ...
    def stop_run(self, id: str) -> None: ...
    def resume_run(self, id: str) -> None: ...
    def submit_sweep(self, spec: _Config) -> str: ...
    def sweeps(self) -> list[dict[str, Any]]: ...
    def sweep(self, id: str) -> dict[str, Any]: ...
    def stop_sweep(self, id: str) -> None: ...
    def submit_population(self, spec: _Config) -> str: ...
    def populations(self) -> list[dict[str, Any]]: ...
    def population(self, id: str) -> dict[str, Any]: ...
    def stop_population(self, id: str) -> None: ...

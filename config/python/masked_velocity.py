"""MaskVelocity: CartPole with its velocities hidden.

A Gymnasium observation wrapper that keeps only the cart's position and the
pole's angle (indices 0 and 2 of CartPole's observation), so a policy that
sees one observation cannot tell which way the pole is falling: the
partially observed CartPole that recurrent agents are checked on (issue 30).
Used by config/cartpole-masked-*.toml as
``env_wrappers = ["masked_velocity:MaskVelocity"]`` with
``python_path = ["python"]``.
"""

import gymnasium as gym
import numpy as np

KEPT = [0, 2]


class MaskVelocity(gym.ObservationWrapper):
    def __init__(self, env):
        super().__init__(env)
        box = env.observation_space
        self.observation_space = gym.spaces.Box(
            low=box.low[KEPT], high=box.high[KEPT], dtype=box.dtype
        )

    def observation(self, observation):
        return np.asarray(observation, dtype=self.observation_space.dtype)[KEPT]

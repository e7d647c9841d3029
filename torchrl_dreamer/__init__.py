"""torchrl_dreamer: DreamerV3 agents trained from pixels on a GPU-batched Game Boy emulator.

Sub-packages mirror TorchRL's layout and are imported lazily, so that using one part (say the
replay in :mod:`torchrl_dreamer.data`) never pays for compiling another (the Warp emulator):

- :mod:`torchrl_dreamer.emulator` -- DMG Game Boy in NVIDIA Warp, one thread per console.
- :mod:`torchrl_dreamer.envs` -- the emulator as a batched TorchRL ``EnvBase``, tasks.
- :mod:`torchrl_dreamer.data` -- time-major replay storage and chronological sequence sampler.
- :mod:`torchrl_dreamer.modules` -- RSSM, encoders, decoders and heads.
- :mod:`torchrl_dreamer.objectives` -- DreamerV3 world-model / actor / critic losses.
- :mod:`torchrl_dreamer.collectors` -- asynchronous actor/learner collector and schedulers.
"""

from torchrl_dreamer.version import __version__

__all__ = ["__version__"]

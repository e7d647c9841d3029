"""torchrl_dreamer.collectors: the asynchronous actor/learner collector and its schedulers.

- :class:`AsyncDreamerCollector` -- actor/learner choreography (reference / threaded / cuda).
- :class:`AsyncCollectorConfig` -- every knob, validated.
- :class:`Ratio`, :class:`UpdateSchedule` -- sheeprl/Hafner replay-ratio scheduling.
- :class:`RateLimiter` -- Reverb samples-per-insert backpressure (Atropos pause rule).
- :class:`EnvDriver` -- the actor's step: act, write one replay row, step the env.
- :class:`FailFast`, :class:`MetricsAccumulator` -- non-finite guard and device-side metrics.
- :class:`ReplayStorage`, :class:`SequenceSampler`, :class:`Learner` -- what the collector
  needs from its collaborators (``typing.Protocol``).
"""

from torchrl_dreamer.collectors.async_collector import (
    AsyncDreamerCollector,
    CollectorTimeout,
    default_weight_sync,
)
from torchrl_dreamer.collectors.config import AsyncCollectorConfig
from torchrl_dreamer.collectors.env_driver import EnvDriver
from torchrl_dreamer.collectors.failfast import FailFast, NonFiniteError, tensor_stats
from torchrl_dreamer.collectors.metrics import MetricsAccumulator
from torchrl_dreamer.collectors.protocols import Learner, ReplayStorage, SequenceSampler
from torchrl_dreamer.collectors.rate_limiter import (
    RateLimiter,
    RateLimiterClosed,
    RateLimiterTimeout,
)
from torchrl_dreamer.collectors.ratio import Ratio, UpdateSchedule
from torchrl_dreamer.collectors.streams import CudaSync, HostSync, make_sync

__all__ = [
    "AsyncCollectorConfig",
    "AsyncDreamerCollector",
    "CollectorTimeout",
    "CudaSync",
    "EnvDriver",
    "FailFast",
    "HostSync",
    "Learner",
    "MetricsAccumulator",
    "NonFiniteError",
    "RateLimiter",
    "RateLimiterClosed",
    "RateLimiterTimeout",
    "Ratio",
    "ReplayStorage",
    "SequenceSampler",
    "UpdateSchedule",
    "default_weight_sync",
    "make_sync",
    "tensor_stats",
]

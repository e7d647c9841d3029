"""torchrl_dreamer.collectors: the asynchronous actor/learner collector and its schedulers.

- :class:`AsyncDreamerCollector` -- actor/learner choreography (reference / threaded / cuda, and
  cuda-twin: the cuda backend's code path on a CPU, its stream ordering checked op by op).
- :class:`AsyncCollectorConfig` -- every knob, validated.
- :mod:`~torchrl_dreamer.collectors.settings` -- the run tree's sections (:class:`EnvSection`,
  :class:`ReplaySection`, ..., :class:`RunSection`): every run setting defined once, the flat
  name mapping :data:`FLAT` / :func:`flatten_settings`, and :func:`takes_settings`, by which a
  flat config takes the settings it shares.
- :class:`Ratio`, :class:`UpdateSchedule` -- sheeprl/Hafner replay-ratio scheduling.
- :class:`RateLimiter` -- Reverb samples-per-insert backpressure (Atropos pause rule).
- :class:`EnvDriver` -- the actor's step: act, write one replay row, step the env.
- :class:`FailFast`, :class:`MetricsAccumulator`, :class:`OverlapMeter` -- non-finite guard,
  device-side metrics, actor/learner busy time and overlap.
- :class:`HostSync`, :class:`StreamSync` (:class:`CudaSync`, :class:`StreamTwin`) -- the
  device-side ordering of each backend; :class:`StreamOrderError` when it is broken.
- :class:`ReplayStorage`, :class:`SequenceSampler`, :class:`Learner` -- what the collector
  needs from its collaborators (``typing.Protocol``).
"""

from torchrl_dreamer.collectors.async_collector import (
    AsyncDreamerCollector,
    CollectorTimeout,
    default_weight_sync,
    make_sync,
)
from torchrl_dreamer.collectors.config import AsyncCollectorConfig
from torchrl_dreamer.collectors.env_driver import EnvDriver
from torchrl_dreamer.collectors.failfast import FailFast, NonFiniteError, tensor_stats
from torchrl_dreamer.collectors.metrics import MetricsAccumulator, OverlapMeter
from torchrl_dreamer.collectors.protocols import Learner, ReplayStorage, SequenceSampler
from torchrl_dreamer.collectors.rate_limiter import (
    RateLimiter,
    RateLimiterClosed,
    RateLimiterTimeout,
)
from torchrl_dreamer.collectors.ratio import Ratio, UpdateSchedule
from torchrl_dreamer.collectors.settings import (
    FLAT,
    SECTIONS,
    CollectorSection,
    EnvSection,
    EvalSection,
    LearnerSection,
    LossSection,
    ModelSection,
    RaySection,
    ReplaySection,
    RunSection,
    flatten_settings,
    takes_settings,
)
from torchrl_dreamer.collectors.stream_twin import StreamTwin
from torchrl_dreamer.collectors.streams import CudaSync, HostSync, StreamOrderError, StreamSync

__all__ = [
    "FLAT",
    "SECTIONS",
    "AsyncCollectorConfig",
    "AsyncDreamerCollector",
    "CollectorSection",
    "CollectorTimeout",
    "CudaSync",
    "EnvDriver",
    "EnvSection",
    "EvalSection",
    "FailFast",
    "HostSync",
    "Learner",
    "LearnerSection",
    "LossSection",
    "ModelSection",
    "MetricsAccumulator",
    "NonFiniteError",
    "OverlapMeter",
    "RateLimiter",
    "RateLimiterClosed",
    "RateLimiterTimeout",
    "RaySection",
    "Ratio",
    "ReplaySection",
    "ReplayStorage",
    "RunSection",
    "SequenceSampler",
    "StreamOrderError",
    "StreamSync",
    "StreamTwin",
    "UpdateSchedule",
    "default_weight_sync",
    "flatten_settings",
    "make_sync",
    "takes_settings",
    "tensor_stats",
]

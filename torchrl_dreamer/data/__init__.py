"""torchrl_dreamer.data: time-major replay for Dreamer on top of TorchRL's replay buffer API.

- :class:`TimeMajorStorage` -- ``[capacity, num_envs, ...]`` ring, integer-row writes, commit
  markers, memmap backing, checkpoints, invariant checks.
- :class:`ChronologicalSliceSampler` -- O(batch) single-env sequences that never cross the write
  pointer and keep episode boundaries inside (``is_first``).
- :class:`TimeMajorWriter` -- TorchRL ``Writer`` appending at the storage head.
- :func:`dreamer_schema`, :class:`FieldSpec` -- the stored fields.
- :func:`rssm_inputs` (with :func:`shift_actions`, :func:`dreamer_inputs`) -- replay rows
  to RSSM inputs.

See ``docs/row_alignment.md`` for what row t holds.
"""

from torchrl_dreamer.data.dreamer_inputs import dreamer_inputs, rssm_inputs, shift_actions
from torchrl_dreamer.data.sampler import ChronologicalSliceSampler
from torchrl_dreamer.data.schema import FieldSpec, dreamer_schema
from torchrl_dreamer.data.storage import ReplayInvariantError, TimeMajorStorage, ring_rows
from torchrl_dreamer.data.writer import TimeMajorWriter

__all__ = [
    "ChronologicalSliceSampler",
    "FieldSpec",
    "ReplayInvariantError",
    "TimeMajorStorage",
    "TimeMajorWriter",
    "dreamer_inputs",
    "dreamer_schema",
    "ring_rows",
    "rssm_inputs",
    "shift_actions",
]

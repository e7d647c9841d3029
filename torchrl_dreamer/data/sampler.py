"""ChronologicalSliceSampler: O(batch) fixed-length sequences from a TimeMajorStorage.

Why not TorchRL's ``SliceSampler``: it scans the whole storage for trajectory ends on every
sample (O(capacity): ~10 ms at 100k x 16, ~100 ms at 1M x 16 on one CPU core), splits slices at
episode ends (Dreamer wants sequences that run through resets, with ``is_first`` marking them) and
picks trajectories uniformly rather than steps. Here valid starts follow from the storage counters
alone (``sampleable_range``), so a sample costs two ``randint`` draws and one gather per field.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.data.replay_buffers.samplers import Sampler

from torchrl_dreamer.data.storage import TimeMajorStorage

_NO_GENERATOR = (
    "ChronologicalSliceSampler needs an explicit torch.Generator for reproducible replay: pass "
    "generator=torch.Generator().manual_seed(seed) to the sampler (or to the ReplayBuffer)."
)


class ChronologicalSliceSampler(Sampler):
    """Samples sequences of ``slice_len`` consecutive steps, each from ONE env.

    Starts are uniform over the chronological (oldest to newest) committed rows of the storage
    (:meth:`TimeMajorStorage.sampleable_range`), so a sequence never crosses the write pointer /
    ring seam and never reads uncommitted rows. Sequences that contain ``is_first`` are returned
    unchanged (not rejected, not split): the world model resets its state there.

    The index is a ``(rows, envs)`` tuple shaped ``[T, B]`` (time-major, default) or ``[B, T]``
    (``time_major=False``, what TorchRL's losses expect), with an extra leading ``n_samples`` dim
    when given. ``info`` holds ``"env_idx"`` and ``"start"`` (absolute step of the first element)
    of each sequence, expanded to the index shape so ``TensorDictReplayBuffer`` can store them;
    take ``[..., 0, :]`` (time-major) or ``[..., 0]`` for one value per sequence.

    Args mirror TorchRL's ``SliceSampler``: give ``slice_len`` or ``num_slices``; the other is
    ``batch_size // (n_samples * given)``, where ``batch_size`` counts transitions.

    Keyword Args:
        slice_len: steps per sequence (T).
        num_slices: sequences per batch (B).
        generator: the ``torch.Generator`` drawing envs and starts (required, here or via
            ``ReplayBuffer(generator=...)``). Same generator state -> same indices and data.
        time_major: ``[T, B]`` (True) or ``[B, T]`` (False).
        n_samples: optional leading dim: ``n_samples`` independent batches in one call.
        event_key: optional field marking rare events: a row is an event where its first element
            is nonzero (a boolean ``"terminated"``, or a float ``"reward"``: every paid step).
        event_fraction: share of each batch's sequences drawn to *contain* an event row of
            ``event_key``: an event (row, env) is drawn uniformly among the sampleable ones and
            the start uniformly among the starts whose sequence covers it (the first
            ``round(event_fraction * B)`` sequences; uniform ones when there is no event yet).
            Why: on a sparse-reward task the rows where the episode ends (the maze's exit) are
            ~0.3 % of the data, too few for the world model's prior to learn to *imagine* them,
            and imagination without the terminal reward misleads the actor (see
            ``docs/learning_results.md``). Costs one scan of the event column over the
            sampleable rows per sample (O(rows x envs), ~0.1 ms per 100k steps), unlike the
            O(batch) uniform draw.
        strict_length: accepted for ``SliceSampler`` compatibility; must be True (sequences are
            always full length).

    Example:
        >>> from torchrl_dreamer.data import TimeMajorStorage, dreamer_schema
        >>> from torchrl_dreamer.data.synthetic import SyntheticSteps
        >>> storage = TimeMajorStorage(1000, 16, spec=dreamer_schema())
        >>> steps = SyntheticSteps(16, torch.Generator().manual_seed(0))
        >>> for _ in range(100):
        ...     _ = storage.write(steps.step())
        >>> sampler = ChronologicalSliceSampler(slice_len=64, generator=torch.Generator().manual_seed(0))
        >>> data, info = sampler.sample_sequences(storage, 16 * 64)
        >>> data.shape, info["env_idx"][0].shape
        (torch.Size([64, 16]), torch.Size([16]))
    """

    def __init__(
        self,
        *,
        slice_len: int | None = None,
        num_slices: int | None = None,
        generator: torch.Generator | None = None,
        time_major: bool = True,
        n_samples: int | None = None,
        strict_length: bool = True,
        event_key: str | None = None,
        event_fraction: float = 0.0,
    ) -> None:
        if (slice_len is None) == (num_slices is None):
            raise TypeError("give exactly one of slice_len and num_slices (like SliceSampler).")
        for name, v in (
            ("slice_len", slice_len),
            ("num_slices", num_slices),
            ("n_samples", n_samples),
        ):
            if v is not None and int(v) < 1:
                raise ValueError(f"{name} must be >= 1, got {v}.")
        if not strict_length:
            raise ValueError(
                "strict_length=False is not supported: sequences are always slice_len long and "
                "run through episode boundaries (is_first marks resets)."
            )
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}.")
        self.slice_len = None if slice_len is None else int(slice_len)
        self.num_slices = None if num_slices is None else int(num_slices)
        self.n_samples = None if n_samples is None else int(n_samples)
        self.time_major = bool(time_major)
        self.strict_length = True
        self._generator = generator
        event_fraction = float(event_fraction)
        if not 0.0 <= event_fraction <= 1.0:
            raise ValueError(f"event_fraction must lie in [0, 1], got {event_fraction}.")
        if event_fraction > 0 and event_key is None:
            raise ValueError("event_fraction > 0 needs event_key (e.g. 'terminated').")
        self.event_key = event_key
        self.event_fraction = event_fraction

    # The replay buffer assigns its own generator (possibly None) through ``_rng``: keep ours
    # unless it hands us a real one.
    @property
    def _rng(self) -> torch.Generator | None:
        return self._generator

    @_rng.setter
    def _rng(self, value: torch.Generator | None) -> None:
        if value is not None:
            self._generator = value

    @property
    def generator(self) -> torch.Generator | None:
        """The generator drawing envs and starts (``None``: torch's global one); assignable, so
        a sampler mixing several draws them all from one stream
        (:class:`~torchrl_dreamer.data.demonstrations.DemoMixingSampler`)."""
        return self._generator

    @generator.setter
    def generator(self, value: torch.Generator | None) -> None:
        self._generator = value

    def resolve(self, batch_size: int | None) -> tuple[int, int]:
        """``(num_slices, slice_len)`` for a ``batch_size`` counting transitions (None: both given)."""
        n = self.n_samples or 1
        if batch_size is None:
            raise ValueError("batch_size (transitions per sample) is required.")
        batch_size = int(batch_size)
        given = self.slice_len if self.slice_len is not None else self.num_slices
        if batch_size % (n * given):
            raise ValueError(
                f"batch_size={batch_size} is not a multiple of n_samples*"
                f"{'slice_len' if self.slice_len is not None else 'num_slices'}={n * given}."
            )
        other = batch_size // (n * given)
        if self.slice_len is not None:
            return other, self.slice_len
        return self.num_slices, other

    def sample(self, storage: TimeMajorStorage, batch_size: int) -> tuple[tuple, dict]:
        """TorchRL sampler entry point: ``((rows, envs), info)`` for ``storage.get``."""
        if not isinstance(storage, TimeMajorStorage):
            raise TypeError(
                f"ChronologicalSliceSampler needs a TimeMajorStorage, got {type(storage).__name__}."
            )
        if self._generator is None:
            raise RuntimeError(_NO_GENERATOR)
        num_slices, slice_len = self.resolve(batch_size)
        lo, hi = storage.sampleable_range()
        count = hi - lo - slice_len + 1
        if count < 1:
            raise ValueError(
                f"slice_len={slice_len} is larger than the {hi - lo} committed rows that can be "
                f"sampled (steps {lo}..{hi - 1}; total_steps={storage.total_steps}, "
                f"committed_t={storage.committed_t}, safety_margin={storage.safety_margin}). "
                "Write/commit more steps before sampling or use a shorter slice_len."
            )
        g = self._generator
        shape = (num_slices,) if self.n_samples is None else (self.n_samples, num_slices)
        start = torch.randint(count, shape, generator=g, device=g.device).add_(lo)
        env = torch.randint(storage.num_envs, shape, generator=g, device=g.device)
        k = round(self.event_fraction * num_slices)
        if k:
            self._event_sequences(storage, lo, hi, slice_len, start[..., :k], env[..., :k])
        dev = storage.device
        start, env = start.to(dev), env.to(dev)
        steps = start.unsqueeze(-1) + torch.arange(slice_len, device=dev)  # [..., B, T]
        env = env.unsqueeze(-1).expand_as(steps)
        start_grid = start.unsqueeze(-1).expand_as(steps)
        if self.time_major:
            steps, env, start_grid = (x.transpose(-1, -2) for x in (steps, env, start_grid))
        rows = steps % storage.capacity
        return (rows, env), {"env_idx": env, "start": start_grid}

    def _event_sequences(
        self, storage: TimeMajorStorage, lo: int, hi: int, slice_len: int,
        start: torch.Tensor, env: torch.Tensor,
    ) -> None:
        """Overwrite ``start``/``env`` (views) with sequences that cover an event row."""
        if self.event_key not in storage.fields:
            raise KeyError(
                f"event_key {self.event_key!r} is not a field of the storage "
                f"({sorted(map(str, storage.fields))})."
            )
        col = storage.fields[self.event_key]
        cap, g = storage.capacity, self._generator
        r0, r1 = lo % cap, (hi - 1) % cap + 1  # ring rows of steps lo..hi-1 (one or two spans)
        spans = [col[r0:r1]] if r0 < r1 else [col[r0:], col[:r1]]
        flags = torch.cat([x.reshape(x.shape[0], storage.num_envs, -1)[..., 0] for x in spans])
        events = flags.to(torch.bool).nonzero().cpu()  # [E, 2]: (step - lo, env)
        if events.shape[0] == 0:
            return
        pick = events[torch.randint(events.shape[0], start.shape, generator=g, device=g.device).cpu()]
        off = torch.randint(slice_len, start.shape, generator=g, device=g.device).cpu()
        first = (pick[..., 0] + lo - off).clamp_(lo, hi - slice_len)
        start.copy_(first.to(start.device))
        env.copy_(pick[..., 1].to(env.device))

    def sample_sequences(
        self, storage: TimeMajorStorage, batch_size: int
    ) -> tuple[TensorDictBase, dict]:
        """Samples and gathers directly (no ReplayBuffer): ``(data, info)``, data ``[T, B]``/``[B, T]``."""
        index, info = self.sample(storage, batch_size)
        info["index"] = index
        return storage.get(index), info

    # ------------------------------------------------------------------ Sampler contract
    def _empty(self) -> None:
        return

    def state_dict(self) -> dict[str, Any]:
        """Configuration and generator state."""
        return {
            "slice_len": self.slice_len,
            "num_slices": self.num_slices,
            "n_samples": self.n_samples,
            "time_major": self.time_major,
            "event_key": self.event_key,
            "event_fraction": self.event_fraction,
            "generator_state": None if self._generator is None else self._generator.get_state(),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores :meth:`state_dict`; the generator state is set on the current generator."""
        self.slice_len = state_dict["slice_len"]
        self.num_slices = state_dict["num_slices"]
        self.n_samples = state_dict["n_samples"]
        self.time_major = state_dict["time_major"]
        self.event_key = state_dict.get("event_key")
        self.event_fraction = float(state_dict.get("event_fraction", 0.0))
        gs = state_dict.get("generator_state")
        if gs is not None:
            if self._generator is None:
                self._generator = torch.Generator()
            self._generator.set_state(gs)

    def dumps(self, path: str | os.PathLike) -> None:
        """Writes ``sampler.json`` (+ ``generator.pt``) into directory ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        sd = self.state_dict()
        gs = sd.pop("generator_state")
        (path / "sampler.json").write_text(json.dumps(sd))
        if gs is not None:
            torch.save(gs, path / "generator.pt")

    def loads(self, path: str | os.PathLike) -> None:
        """Inverse of :meth:`dumps`."""
        path = Path(path)
        sd = json.loads((path / "sampler.json").read_text())
        gfile = path / "generator.pt"
        sd["generator_state"] = torch.load(gfile) if gfile.is_file() else None
        self.load_state_dict(sd)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        g = state.pop("_generator")
        state["_generator_state"] = None if g is None else (g.get_state(), str(g.device))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        gs = state.pop("_generator_state", None)
        state.pop("_rng", None)
        self.__dict__.update(state)
        self._generator = None
        if gs is not None:
            self._generator = torch.Generator(device=gs[1])
            self._generator.set_state(gs[0])

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(slice_len={self.slice_len}, num_slices={self.num_slices}, "
            f"n_samples={self.n_samples}, time_major={self.time_major}"
            + (f", event_key={self.event_key!r}, event_fraction={self.event_fraction}"
               if self.event_fraction else "") + ")"
        )

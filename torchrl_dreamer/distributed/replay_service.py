"""``ReplayService``: the replay of a distributed run, one object serving every env runner.

Each runner (a *slot*, named so a restarted runner finds its data again) owns one
:class:`~torchrl_dreamer.data.TimeMajorStorage` (``[capacity, num_envs]``, memmap-backed when the
service has a ``root_dir``), since runners may have different ``num_envs`` and write at their own
pace. Runners send *chunks* of consecutive rows; a chunk is written and committed as a whole
before the call returns, so what a runner was told is committed is never lost (a runner killed
mid-chunk loses only rows it never sent). Sequences are drawn with
:class:`~torchrl_dreamer.data.ChronologicalSliceSampler`, across slots by per-group weights.

A *static* slot (:meth:`ReplayService.load_static`) holds rows loaded once, e.g. human
demonstrations: sized to them, never evicted, counting no policy steps, not checkpointed.

Backpressure uses the local collector's :class:`~torchrl_dreamer.collectors.RateLimiter` in
gradient-step units: every committed chunk inserts the gradient steps the
:class:`~torchrl_dreamer.collectors.UpdateSchedule` grants for the run's policy steps, every
sampled batch takes one. Runners are told to pause (``reply["paused"]``) while more than
``max_queued`` granted steps wait (the Atropos rule); the learner gets ``None`` while starved.
The service itself never blocks, so it runs as a plain single-threaded Ray actor.

Why not TorchRL's ``RayReplayBuffer``: it has no rate limiter, no commit markers, no runner
registry or per-group weights, and its ``SliceSampler`` rescans the storage on every sample.
The API shape (register/report/disconnect, per-env weights, learner step) follows Atropos.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_dreamer.collectors.rate_limiter import RateLimiter
from torchrl_dreamer.collectors.ratio import UpdateSchedule
from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage

__all__ = ["ReplayService", "SlotInfo", "batch_from_numpy"]


def batch_from_numpy(out: tuple[dict, dict] | None) -> tuple[TensorDictBase, dict] | None:
    """Inverse of :meth:`ReplayService.sample_numpy`: ``(TensorDict [T, B], info)``, or None.

    Arrays from a zero-copy ``ray.get`` are read-only; they are copied once into tensors.
    """
    if out is None:
        return None
    arrays, info = out
    tensors = {k: torch.from_numpy(v if v.flags.writeable else v.copy())
               for k, v in arrays.items()}
    shape = next(iter(tensors.values())).shape[:2]
    td = TensorDict({}, batch_size=shape)
    for k, v in tensors.items():
        td.set(k, v)
    info = {k: (torch.from_numpy(v.copy()) if isinstance(v, np.ndarray) else v)
            for k, v in info.items()}
    return td, info

_META = "service.json"


def _as_rows(rows: TensorDictBase | Mapping[str, torch.Tensor]) -> TensorDictBase:
    """``rows`` as a TensorDict whose batch is the first two dims of its fields (``[L, N]``)."""
    if isinstance(rows, TensorDictBase):
        return rows
    td = TensorDict(dict(rows), batch_size=[])
    td.batch_size = next(iter(td.values())).shape[:2]
    return td


def _write_committed(st: TimeMajorStorage, rows: TensorDictBase) -> None:
    """Writes ``rows`` (``[L, N]``, time first) into ``st`` and commits them."""
    leaves = dict(rows.items(include_nested=True, leaves_only=True))
    t = -1
    for i in range(rows.batch_size[0]):  # a flat dict per row: the storage's fast path
        t = st.write({k: v[i] for k, v in leaves.items()})
    if t >= 0:
        st.commit(t)


@dataclass
class SlotInfo:
    """Bookkeeping of one runner slot (its storage lives in ``ReplayService._storages``)."""

    name: str
    num_envs: int
    group: str = "default"
    weight: float = 1.0
    runner_id: int | None = None
    active: bool = False
    registrations: int = 0
    chunks: int = 0
    reported_step: int = 0
    queued_steps: int = 0
    min_policy_version: int | None = None
    max_policy_version: int | None = None
    episode_offset: list[int] = field(default_factory=list)
    static: bool = False
    """Rows loaded once (:meth:`ReplayService.load_static`), no runner: never checkpointed."""

    def to_json(self) -> dict[str, Any]:
        """JSON form (checkpoints)."""
        return dict(self.__dict__)


class ReplayService:
    """Replay for several env runners: chunks in, weighted sequence batches out, rate-limited.

    Args:
        capacity: rows kept per runner slot (each row is one env-step of that runner's envs).
        seq_len: sequence length ``T`` of sampled batches.

    Keyword Args:
        replay_ratio: gradient steps per policy step granted to the learner.
        learning_starts: policy steps (all runners together) before the first grant.
        policy_steps_per_iter: envs stepping per iteration across the run (aligns the schedule
            start like sheeprl's ``num_envs``); 1 is fine when unknown.
        max_queued: granted but untaken gradient steps beyond which runners pause (``>= 2``).
        rate_limited: ``False`` for a service whose writers must never pause (e.g. human play);
            its samples are then only bounded by data availability.
        root_dir: directory for memmap-backed slot storages (``None``: in RAM).
        seed: seeds the sampling generator.
        name: shown in messages and stats (e.g. ``"agent"``, ``"human"``).
        event_key, event_fraction: the local replay's biased draw (``replay.event_key`` /
            ``replay.event_fraction``, :class:`~torchrl_dreamer.data.ChronologicalSliceSampler`):
            ``round(event_fraction * batch_size)`` of each batch's sequences, at random
            positions of the batch and so spread over the slots like the uniform ones, are
            drawn to contain a row whose ``event_key`` is nonzero (a slot with no such row yet
            gives uniform ones). 0: uniform starts only.

    Example:
        An in-process runner on the shipped maze commits the chunks.

        >>> from torchrl_dreamer.distributed import EnvRunner, WeightStore
        >>> from torchrl_dreamer.envs import GameBoyEnv
        >>> svc = ReplayService(1000, seq_len=8, replay_ratio=0.5, learning_starts=0, max_queued=64)
        >>> runner = EnvRunner("runner-0", lambda: GameBoyEnv("maze", num_envs=4), None, svc,
        ...                    WeightStore(), chunk_len=16)
        >>> runner.run(max_chunks=2)["chunks"]  # registers, then commits 2 chunks of [16, 4] rows
        2
        >>> batch, info = svc.sample(4)  # or None while starved / not granted
        >>> batch.batch_size
        torch.Size([8, 4])
    """

    def __init__(
        self,
        capacity: int,
        seq_len: int,
        *,
        replay_ratio: float = 0.5,
        learning_starts: int = 0,
        policy_steps_per_iter: int = 1,
        max_queued: float = 64.0,
        rate_limited: bool = True,
        root_dir: str | os.PathLike | None = None,
        seed: int = 0,
        name: str = "replay",
        event_key: str | None = None,
        event_fraction: float = 0.0,
    ) -> None:
        if int(seq_len) < 2 or int(capacity) < int(seq_len):
            raise ValueError(
                f"ReplayService: need 2 <= seq_len ({seq_len}) <= capacity ({capacity}) so a "
                "slot can hold one sequence."
            )
        if max_queued < 2:
            raise ValueError(f"ReplayService: max_queued={max_queued} must be >= 2.")
        if not 0.0 <= float(event_fraction) <= 1.0:
            raise ValueError(f"ReplayService: event_fraction={event_fraction} must lie in [0, 1].")
        self.capacity = int(capacity)
        self.seq_len = int(seq_len)
        self.name = name
        self.rate_limited = bool(rate_limited)
        self.root_dir = None if root_dir is None else Path(root_dir)
        self.limiter = RateLimiter.queue(float(max_queued))
        self.schedule = UpdateSchedule(
            replay_ratio, learning_starts, max(1, int(policy_steps_per_iter)),
            seq_len=self.seq_len, version="0.8",
        )
        self.generator = torch.Generator().manual_seed(int(seed))
        self.sampler = ChronologicalSliceSampler(slice_len=self.seq_len, generator=self.generator)
        #: share of each batch drawn around ``event_key`` rows (0: uniform batches)
        self.event_fraction = float(event_fraction)
        #: draws sequences that contain an event row (``None`` when ``event_fraction`` is 0)
        self.event_sampler = None if self.event_fraction == 0 else ChronologicalSliceSampler(
            slice_len=self.seq_len, generator=self.generator, event_key=event_key,
            event_fraction=1.0)
        self.slots: dict[str, SlotInfo] = {}
        self._storages: dict[str, TimeMajorStorage] = {}
        self._by_id: dict[int, str] = {}
        self._next_id = 0
        self.policy_steps = 0
        self.learner_version = 0
        self.stop_requested = False
        self.max_version_lag = 0
        self.paused_replies = 0
        self.max_backlog = 0.0
        self.group_weights: dict[str, float] = {}

    # ------------------------------------------------------------------ runners
    def register(
        self, name: str, num_envs: int, *, group: str = "default", weight: float = 1.0
    ) -> dict[str, Any]:
        """Registers (or re-registers, after a restart) runner slot ``name``.

        Returns ``{"runner_id", "learner_step", "policy_steps", "paused", "stop", ...}``. A
        restarted runner keeps its slot and data; its episode ids continue where they stopped.
        """
        num_envs = int(num_envs)
        if weight < 0 or not math.isfinite(weight):
            raise ValueError(f"register({name!r}): weight={weight} must be a finite number >= 0.")
        slot = self.slots.get(name)
        if slot is not None and slot.static:
            raise ValueError(f"runner name {name!r} is a static slot (load_static); use another.")
        if slot is None:
            slot = SlotInfo(name, num_envs, group, float(weight))
            self.slots[name] = slot
            self._storages[name] = self._new_storage(name, num_envs)
        elif slot.num_envs != num_envs:
            raise ValueError(
                f"runner slot {name!r} holds num_envs={slot.num_envs} but re-registers with "
                f"num_envs={num_envs}; use a new runner name for a different env count."
            )
        else:
            slot.group, slot.weight = group, float(weight)
            slot.episode_offset = self._next_episode_ids(name)
        if slot.runner_id is not None:
            self._by_id.pop(slot.runner_id, None)
        slot.runner_id = self._next_id
        self._next_id += 1
        self._by_id[slot.runner_id] = name
        slot.active = True
        slot.registrations += 1
        return {"runner_id": slot.runner_id, "slot": name, **self._reply()}

    def _new_storage(self, name: str, num_envs: int) -> TimeMajorStorage:
        mm = None
        if self.root_dir is not None:
            mm = self.root_dir / "slots" / name
        return TimeMajorStorage(self.capacity, num_envs, memmap_dir=mm, auto_commit=False)

    def _next_episode_ids(self, name: str) -> list[int]:
        st = self._storages[name]
        if not st.initialized or st.total_steps == 0 or "episode_id" not in st.fields:
            return list(self.slots[name].episode_offset)
        last = st.fields["episode_id"][st.row_of(st.total_steps - 1)]
        return [int(x) + 1 for x in last.reshape(-1)]

    def _slot_of(self, runner_id: int) -> SlotInfo:
        name = self._by_id.get(int(runner_id))
        if name is None:
            raise KeyError(
                f"unknown runner_id {runner_id} on replay service {self.name!r}: register() "
                "first (a restarted runner must register again)."
            )
        return self.slots[name]

    def report(
        self,
        runner_id: int,
        *,
        step: int | None = None,
        queued_steps: int | None = None,
        weight: float | None = None,
    ) -> dict[str, Any]:
        """A runner's status (current step, queued steps, sampling weight); returns the reply."""
        slot = self._slot_of(runner_id)
        if step is not None:
            slot.reported_step = int(step)
        if queued_steps is not None:
            slot.queued_steps = int(queued_steps)
        if weight is not None:
            if weight < 0 or not math.isfinite(weight):
                raise ValueError(f"report: weight={weight} must be a finite number >= 0.")
            slot.weight = float(weight)
        return self._reply()

    def disconnect(self, runner_id: int) -> dict[str, Any]:
        """Marks the runner gone; its committed data stays sampleable."""
        slot = self._slot_of(runner_id)
        slot.active = False
        self._by_id.pop(int(runner_id), None)
        slot.runner_id = None
        return self._reply()

    def set_group_weight(self, group: str, weight: float) -> None:
        """Overrides the sampling weight of a runner group (default: mean of its slots')."""
        if weight < 0 or not math.isfinite(weight):
            raise ValueError(f"set_group_weight: weight={weight} must be a finite number >= 0.")
        self.group_weights[group] = float(weight)

    def _reply(self) -> dict[str, Any]:
        paused = self.rate_limited and not self.limiter.can_insert(0)
        if paused:
            self.paused_replies += 1
        return {
            "paused": paused,
            "stop": self.stop_requested,
            "learner_step": self.limiter.samples,
            "learner_version": self.learner_version,
            "policy_steps": self.policy_steps,
            "queued": self.limiter.queued,
        }

    # ------------------------------------------------------------------ writes
    def add_chunk(
        self, runner_id: int, chunk: TensorDictBase | Mapping[str, torch.Tensor],
        policy_version: int = 0,
    ) -> dict[str, Any]:
        """Writes and commits ``chunk`` (``[L, num_envs]`` rows, in time order) for a runner.

        When this returns, the rows are committed (sampleable, checkpointed). The reply tells the
        runner whether to pause before its next chunk, or stop.
        """
        slot = self._slot_of(runner_id)
        if slot.static:
            raise ValueError(f"slot {slot.name!r} is static (load_static): no chunks go there.")
        st = self._storages[slot.name]
        chunk = _as_rows(chunk)
        if chunk.batch_dims < 2 or chunk.batch_size[1] != slot.num_envs:
            raise ValueError(
                f"chunk for slot {slot.name!r} has batch {list(chunk.batch_size)}; expected "
                f"[L, num_envs={slot.num_envs}] (time first)."
            )
        if "control_mode" in chunk.keys():
            chunk = chunk.exclude("control_mode")
        if slot.episode_offset and "episode_id" in chunk.keys():
            off = torch.tensor(slot.episode_offset, dtype=chunk["episode_id"].dtype)
            chunk = chunk.clone(False)
            chunk.set("episode_id", chunk["episode_id"] + off.reshape(
                1, -1, *([1] * (chunk["episode_id"].dim() - 2))))
        length = chunk.batch_size[0]
        _write_committed(st, chunk)
        slot.chunks += 1
        v = int(policy_version)
        slot.min_policy_version = v if slot.min_policy_version is None else min(
            slot.min_policy_version, v)
        slot.max_policy_version = v if slot.max_policy_version is None else max(
            slot.max_policy_version, v)
        self.max_version_lag = max(self.max_version_lag, self.learner_version - v)
        self.policy_steps += length * slot.num_envs
        granted = self.schedule(self.policy_steps)
        if granted:
            self.limiter.force_insert(granted)
        self.max_backlog = max(self.max_backlog, self.limiter.queued)
        return self._reply()

    def load_static(
        self, name: str, rows: TensorDictBase | Mapping[str, torch.Tensor], *,
        group: str = "default", weight: float = 1.0,
    ) -> dict[str, Any]:
        """A slot ``name`` holding exactly ``rows`` (``[L, num_envs]``, time first), committed.

        For data loaded once rather than collected, e.g. human demonstrations
        (:func:`~torchrl_dreamer.distributed.demonstrations.demonstration_rows`): the slot is
        sized to its rows (``L``, whatever the service's ``capacity``), so nothing evicts them;
        the rows count no policy steps and grant no gradient steps; no runner writes to it; it
        is sampled like any slot of its ``group``. It is not part of :meth:`checkpoint`: a
        resumed run loads it again from its source (loading a name again replaces the slot).
        A ``control_mode`` field is dropped, as from runner chunks. Returns the slot's
        :meth:`stats` entry.
        """
        rows = _as_rows(rows)
        if "control_mode" in rows.keys():
            rows = rows.exclude("control_mode")
        if weight < 0 or not math.isfinite(weight):
            raise ValueError(f"load_static({name!r}): weight={weight} must be a finite number >= 0.")
        if rows.batch_dims < 2 or rows.batch_size[0] < self.seq_len:
            raise ValueError(
                f"load_static({name!r}): rows of batch {list(rows.batch_size)} must be "
                f"[L, num_envs] with L >= seq_len={self.seq_len} (one sequence)."
            )
        old = self.slots.get(name)
        if old is not None and not old.static:
            raise ValueError(f"slot {name!r} belongs to a runner; give the static rows another name.")
        length, num_envs = int(rows.batch_size[0]), int(rows.batch_size[1])
        st = TimeMajorStorage(length, num_envs, auto_commit=False)
        _write_committed(st, rows)
        st.check_invariants()
        self.slots[name] = SlotInfo(name, num_envs, group, float(weight), static=True)
        self._storages[name] = st
        return self.stats()["slots"][name]

    # ------------------------------------------------------------------ sampling
    def _eligible(self) -> list[str]:
        out = []
        for name, st in self._storages.items():
            if not st.initialized:
                continue
            lo, hi = st.sampleable_range()
            if hi - lo >= self.seq_len:
                out.append(name)
        return out

    def group_weight(self, group: str) -> float:
        """The sampling weight of ``group``: its override, else the mean of its slots' weights."""
        if group in self.group_weights:
            return self.group_weights[group]
        ws = [s.weight for s in self.slots.values() if s.group == group]
        return sum(ws) / len(ws) if ws else 0.0

    def can_sample(self) -> bool:
        """Whether :meth:`sample` would return a batch now."""
        if self.rate_limited and not self.limiter.can_sample(1):
            return False
        return any(self.group_weight(self.slots[n].group) > 0 for n in self._eligible())

    def _allocate(self, weights: torch.Tensor, n: int) -> torch.Tensor:
        """``n`` draws over categories with probabilities ``weights`` (counts per category)."""
        idx = torch.multinomial(weights, n, replacement=True, generator=self.generator)
        return torch.bincount(idx, minlength=len(weights))

    def sample_numpy(self, batch_size: int, consume: int = 1) -> tuple[dict, dict] | None:
        """:meth:`sample` with every tensor as a numpy array: what Ray ships zero-copy.

        Rebuild the batch with :func:`batch_from_numpy`. Through a Ray actor this is several
        times faster than returning the TensorDict (pickled tensors are copied twice).
        """
        out = self.sample(batch_size, consume)
        if out is None:
            return None
        batch, info = out
        arrays = {k: v.numpy() for k, v in batch.items(include_nested=True, leaves_only=True)}
        info = {k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in info.items()}
        return arrays, info

    def sample(self, batch_size: int, consume: int = 1) -> tuple[TensorDictBase, dict] | None:
        """``batch_size`` sequences ``[T, B]`` over slots by group weight; ``None`` when starved.

        Groups are drawn by weight (among groups holding a full sequence), slots within a group
        by sampleable cells, starts uniformly (:class:`ChronologicalSliceSampler`). ``consume``
        gradient-step grants are taken from the rate limiter (0: do not count this batch).
        ``info`` holds per-sequence ``slot`` (index into ``info["slots"]``), ``group`` (index into
        ``info["groups"]``), ``env_idx`` and ``start``.
        """
        batch_size = int(batch_size)
        if batch_size < 1:
            raise ValueError(f"sample: batch_size={batch_size} must be >= 1 (sequences).")
        if self.rate_limited and consume and not self.limiter.can_sample(consume):
            return None
        names = [n for n in self._eligible() if self.group_weight(self.slots[n].group) > 0]
        if not names:
            return None
        groups = sorted({self.slots[n].group for n in names})
        gw = torch.tensor([self.group_weight(g) for g in groups], dtype=torch.float64)
        per_group = self._allocate(gw, batch_size)
        draws: list[tuple[str, int, int]] = []  # (slot, group index, sequences)
        for gi, g in enumerate(groups):
            k = int(per_group[gi])
            if k == 0:
                continue
            members = [n for n in names if self.slots[n].group == g]
            cells = []
            for n in members:
                lo, hi = self._storages[n].sampleable_range()
                cells.append(float((hi - lo - self.seq_len + 1) * self.slots[n].num_envs))
            per_slot = self._allocate(torch.tensor(cells, dtype=torch.float64), k)
            draws += [(n, gi, ks) for n, ks in zip(members, per_slot.tolist()) if ks]
        events = self._event_counts([ks for _, _, ks in draws], batch_size)
        parts, slot_ids, group_ids, envs, starts = [], [], [], [], []
        for (n, gi, ks), ke in zip(draws, events):
            st = self._storages[n]
            for sampler, m in ((self.event_sampler, ke), (self.sampler, ks - ke)):
                if m == 0:
                    continue
                index, info = sampler.sample(st, m * self.seq_len)
                parts.append(st.get(index))
                envs.append(info["env_idx"][0])
                starts.append(info["start"][0])
            slot_ids.append(torch.full((ks,), names.index(n)))
            group_ids.append(torch.full((ks,), gi))
        if self.rate_limited and consume:
            self.limiter.sample(consume, timeout=0)
        batch = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        info = {
            "slots": names,
            "groups": groups,
            "slot": torch.cat(slot_ids),
            "group": torch.cat(group_ids),
            "env_idx": torch.cat(envs),
            "start": torch.cat(starts),
        }
        return batch, info

    def _event_counts(self, per_slot: list[int], batch_size: int) -> list[int]:
        """How many of each slot's sequences are drawn around an event row: the batch's
        ``round(event_fraction * batch_size)`` event positions picked at random among its
        ``batch_size``, so the share is exact for the batch however the slots split it."""
        if self.event_sampler is None:
            return [0] * len(per_slot)
        k = round(self.event_fraction * batch_size)
        chosen = torch.zeros(batch_size, dtype=torch.long)
        chosen[torch.randperm(batch_size, generator=self.generator)[:k]] = 1
        return [int(x.sum()) for x in chosen.split(per_slot)]

    def consume(self, n: int = 1) -> None:
        """Takes ``n`` gradient-step grants without sampling (a batch drawn from elsewhere)."""
        if self.rate_limited and n:
            self.limiter.sample(int(n), timeout=0)

    def set_learner_version(self, version: int) -> None:
        """The learner's weight version (to measure the version lag of incoming chunks)."""
        self.learner_version = int(version)

    def request_stop(self) -> None:
        """Every later reply carries ``stop=True``: runners finish their chunk and disconnect."""
        self.stop_requested = True

    def clear_stop(self) -> None:
        """Undoes :meth:`request_stop` (e.g. after restoring a checkpoint to continue a run)."""
        self.stop_requested = False

    # ------------------------------------------------------------------ introspection
    def slot_rows(self, name: str) -> dict[str, torch.Tensor]:
        """Copies of slot ``name``'s committed rows, oldest first (``[rows, num_envs, ...]``)."""
        st = self._storages[name]
        if not st.initialized:
            return {}
        lo = st.total_steps - st.size
        hi = st.committed_t + 1
        rows = torch.arange(lo, hi) % st.capacity
        return {k: v.index_select(0, rows).clone() for k, v in st.fields.items()}

    def check_invariants(self) -> None:
        """Runs :meth:`TimeMajorStorage.check_invariants` on every slot (episode ids, resets)."""
        for st in self._storages.values():
            st.check_invariants()

    def stats(self) -> dict[str, Any]:
        """Counters for monitoring and tests (plain Python values)."""
        slots = {}
        for name, s in self.slots.items():
            st = self._storages[name]
            slots[name] = {
                **s.to_json(),
                "total_steps": st.total_steps,
                "committed_t": st.committed_t,
                "size": st.size,
            }
        return {
            "name": self.name,
            "policy_steps": self.policy_steps,
            "inserts": self.limiter.inserts,
            "samples": self.limiter.samples,
            "queued": self.limiter.queued,
            "max_queued": self.limiter.max_diff,
            "learner_version": self.learner_version,
            "max_version_lag": self.max_version_lag,
            "max_policy_version_seen": max(
                (s.max_policy_version or 0 for s in self.slots.values()), default=0),
            "paused_replies": self.paused_replies,
            "max_backlog": self.max_backlog,
            "active_runners": sum(s.active for s in self.slots.values()),
            "slots": slots,
        }

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self, path: str | os.PathLike) -> str:
        """Writes every runner slot's committed rows (not the static ones), the limiter, schedule, generator and registry.

        Written into ``path + ".tmp"`` then renamed, so a crash mid-checkpoint leaves the
        previous checkpoint intact. Returns ``str(path)``.
        """
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        for name, st in self._storages.items():
            if st.initialized and not self.slots[name].static:
                st.dumps(tmp / "slots" / name)
        torch.save(self.generator.get_state(), tmp / "generator.pt")
        meta = {
            "capacity": self.capacity,
            "seq_len": self.seq_len,
            "name": self.name,
            "limiter": self.limiter.state_dict(),
            "schedule": self.schedule.state_dict(),
            "policy_steps": self.policy_steps,
            "learner_version": self.learner_version,
            "next_id": self._next_id,
            "group_weights": self.group_weights,
            "slots": [s.to_json() for s in self.slots.values() if not s.static],
        }
        (tmp / _META).write_text(json.dumps(meta, indent=1))
        if path.exists():
            shutil.rmtree(path)
        tmp.rename(path)
        return str(path)

    def restore(self, path: str | os.PathLike) -> dict[str, Any]:
        """Loads a :meth:`checkpoint` into this (fresh) service; every runner must re-register.

        Returns :meth:`stats` after loading.
        """
        path = Path(path)
        meta_file = path / _META
        if not meta_file.is_file():
            raise FileNotFoundError(f"{meta_file} not found: not a ReplayService checkpoint.")
        meta = json.loads(meta_file.read_text())
        if (meta["capacity"], meta["seq_len"]) != (self.capacity, self.seq_len):
            raise ValueError(
                f"checkpoint has capacity={meta['capacity']}, seq_len={meta['seq_len']}; this "
                f"service has {self.capacity}, {self.seq_len}. Build it with the same sizes."
            )
        self.limiter.load_state_dict(meta["limiter"])
        self.schedule.load_state_dict(meta["schedule"])
        self.policy_steps = int(meta["policy_steps"])
        self.learner_version = int(meta["learner_version"])
        self._next_id = int(meta["next_id"])
        self.group_weights = dict(meta["group_weights"])
        self.generator.set_state(torch.load(path / "generator.pt"))
        self.slots, self._storages, self._by_id = {}, {}, {}
        for sj in meta["slots"]:
            slot = SlotInfo(**sj)
            slot.active, slot.runner_id = False, None
            self.slots[slot.name] = slot
            st = self._new_storage(slot.name, slot.num_envs)
            sdir = path / "slots" / slot.name
            if sdir.is_dir():
                st.loads(sdir)
            self._storages[slot.name] = st
        return self.stats()

"""Replay demo: fill a TimeMajorStorage with synthetic Dreamer rows, sample, build RSSM inputs.

Run: ``python examples/replay_demo.py``. Uses :class:`~torchrl_dreamer.data.synthetic.SyntheticSteps`
(rows with the deferred-reset alignment of ``docs/row_alignment.md``) instead of a real env, and
samples both directly and through TorchRL's ``TensorDictReplayBuffer``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from torchrl.data import TensorDictReplayBuffer

from torchrl_dreamer.data import (
    ChronologicalSliceSampler,
    TimeMajorStorage,
    TimeMajorWriter,
    dreamer_inputs,
    dreamer_schema,
)
from torchrl_dreamer.data.synthetic import SyntheticSteps


def main() -> None:
    torch.set_num_threads(1)
    num_envs, capacity, T, B = 16, 1000, 64, 16
    storage = TimeMajorStorage(capacity, num_envs, spec=dreamer_schema(), debug_checks=True)
    steps = SyntheticSteps(num_envs, torch.Generator().manual_seed(0), end_prob=0.02)
    for _ in range(1500):  # wraps the ring once
        t = storage.total_steps
        storage.obs_slot(t).copy_(steps.step_pixels(t))  # "render" into the replay, no copy later
        row = steps.step()
        del row["pixels"]
        storage.write(row)
    storage.check_invariants()
    print(storage)
    print(
        "held steps", storage.sampleable_range(), "bytes/transition", storage.bytes_per_transition()
    )

    sampler = ChronologicalSliceSampler(slice_len=T, generator=torch.Generator().manual_seed(1))
    data, info = sampler.sample_sequences(storage, B * T)
    print("sample", tuple(data.batch_size), "pixels", tuple(data["pixels"].shape))
    print("env of each sequence", info["env_idx"][0].tolist())
    print("is_first inside sequences:", int(data["is_first"][1:].sum()))

    inputs = dreamer_inputs(data, num_actions=steps.num_actions)
    print(
        "prev_action",
        tuple(inputs["prev_action"].shape),
        "is_first[0] forced:",
        bool(inputs["is_first"][0].all()),
    )

    rb = TensorDictReplayBuffer(
        storage=storage,
        writer=TimeMajorWriter(),
        sampler=ChronologicalSliceSampler(
            slice_len=T, generator=torch.Generator().manual_seed(2), time_major=False
        ),
        batch_size=B * T,
    )
    rb.add(TensorDict(steps.step(), batch_size=[num_envs]))
    batch = rb.sample()
    print(
        "TensorDictReplayBuffer batch-major sample", tuple(batch.batch_size), sorted(batch.keys())
    )


if __name__ == "__main__":
    main()

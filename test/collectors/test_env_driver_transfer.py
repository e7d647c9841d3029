"""The env driver across devices (the hybrid run: consoles on the CPU cores, replay and model on
the GPU). On a CPU the same copies run with ``transfer=True``: the rows written must equal those
of a driver without transfers, step for step, and the staging buffers must be reused, not
reallocated. On CUDA a short hybrid training run checks the real thing."""

from __future__ import annotations

import torch
from conftest import requires_cuda

from torchrl_dreamer.collectors.env_driver import EnvDriver
from torchrl_dreamer.data import TimeMajorStorage, dreamer_schema
from torchrl_dreamer.envs import GameBoyEnv


class _FirstAction:
    """A policy that always takes action 1 (reads the frames, so the keys must be there)."""

    def __call__(self, td):
        assert td.get("pixels").shape[0] == 3
        return td.set("action", torch.ones(3, dtype=torch.int64, device=td.device))


def _rows(transfer: bool, steps: int = 12):
    env = GameBoyEnv("maze", num_envs=3, seed=5, frame_skip=6)
    storage = TimeMajorStorage(32, 3, spec=dreamer_schema())
    driver = EnvDriver(env, storage, _FirstAction(), torch.Generator().manual_seed(0),
                       transfer=transfer)
    driver.reset()
    ptrs = []
    for k in range(steps):
        driver.step(random=k < 4)
        ptrs.append({str(key): buf.data_ptr() for key, buf in driver.staging.items()}
                    if transfer else {})
    return storage, driver, ptrs


def test_transfer_writes_the_same_rows_and_reuses_its_staging_buffers():
    plain, d_plain, _ = _rows(False)
    moved, d_moved, ptrs = _rows(True)
    assert d_moved.transfer and not d_plain.transfer
    assert d_plain.rendered is not None and d_moved.rendered is None  # no zero copy across
    for key, val in plain.fields.items():
        assert torch.equal(moved.fields[key][:12], val[:12]), key
    assert "pixels" in ptrs[0] and all(p == ptrs[0] for p in ptrs[1:])
    assert d_moved.current.device == moved.device


@requires_cuda
def test_hybrid_run_consoles_on_cpu_model_on_cuda(tmp_path):
    from torchrl_dreamer.trainers import DreamerTrainer, TrainConfig

    cfg = TrainConfig(task="maze", preset="tiny", num_envs=4, batch_size=4, seq_len=8,
                      steps_per_rollout=8, commit_stride=4, replay_capacity=512,
                      learning_starts=32, replay_ratio=0.1, frame_skip=6, log_every=2,
                      eval_episodes=2, progress=False, backend="reference", seed=3,
                      total_steps=128, device="cuda", env_device="cpu",
                      log_dir=str(tmp_path / "run"))
    trainer = DreamerTrainer(cfg, quiet=True)
    p = trainer.parts
    assert p.env.device.type == "cpu" and p.storage.device.type == "cuda"
    row = trainer.train()
    assert row["updates"] > 0
    assert p.storage.fields["pixels"].device.type == "cuda"
    trainer.close()

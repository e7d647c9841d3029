"""DreamerV3 training script in the style of TorchRL's ``sota-implementations``.

Settings live in YAML files next to this script (``config.yaml``: maze; ``config_catch.yaml``;
``config_cartpole.yaml``); override any of them on the command line as ``key=value``::

    python examples/dreamer_v3/train.py                               # maze, tiny, CPU
    python examples/dreamer_v3/train.py --config-name config_catch total_steps=20000
    python examples/dreamer_v3/train.py device=cuda backend=cuda num_envs=256 preset=S

Everything is done by :class:`torchrl_dreamer.trainers.DreamerTrainer` (progress bar, CSV logs,
checkpoints; ``resume=true`` continues the run in ``log_dir``); see
``python -m torchrl_dreamer.train --help`` for the same run as a CLI.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
import yaml

from torchrl_dreamer.trainers import DreamerTrainer, TrainConfig, evaluate, make_env

HERE = Path(__file__).resolve().parent


def parse_overrides(items: list[str]) -> dict:
    """``["a=1", "b=x"]`` -> ``{"a": 1, "b": "x"}`` (values parsed as YAML scalars)."""
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"override {item!r} must look like key=value")
        key, value = item.split("=", 1)
        out[key.replace("-", "_")] = yaml.safe_load(value)
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config-name", default="config", help="YAML file name in this folder")
    parser.add_argument("overrides", nargs="*", help="key=value settings")
    args = parser.parse_args(argv)
    overrides = parse_overrides(args.overrides)
    resume = bool(overrides.pop("resume", False))
    cfg = TrainConfig.from_file(HERE / f"{args.config_name}.yaml", **overrides)
    torch.set_num_threads(cfg.torch_threads)
    trainer = DreamerTrainer(cfg, resume=cfg.log_dir if resume else None)
    summary = dict(trainer.train())
    if cfg.eval_episodes:
        env = make_env(cfg, num_envs=cfg.eval_episodes)
        gif = Path(cfg.log_dir) / "eval.gif"
        res = evaluate(env, trainer.parts.world_model, trainer.parts.actor, gif=gif)
        summary.update(eval_success_rate=res.success_rate, eval_mean_return=res.mean_return)
    trainer.close()
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()

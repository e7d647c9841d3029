"""Where does a rare reward get lost? Probe a checkpoint's world model and critic around it.

An agent that meets a large reward now and then in training but never goes for it can fail at
three places: the world model does not recognise the rewarding frame, its dynamics (the prior)
never imagine reaching it, or the critic does not value the states before it. The actor learns
only from imagination, so each link must hold. This script plays ``--steps`` steps of
``--envs`` consoles with the checkpoint's own world model and actor (sampled actions unless
``--greedy``) and, at every step whose real reward is at least ``--min-reward``, reads:

- ``posterior``: the reward head on the posterior state of the frame the reward came with
  (the world model sees the reward);
- ``prior[k]``: the reward head after ``k`` imagined steps from the posterior state ``k`` steps
  earlier, with the actions really taken (mean over ``--samples`` prior draws): the dynamics
  foresee it;
- ``value_before``: the critic's value of the state the rewarded action was taken in.

It prints one JSON line per rewarded step and a summary line with their means and the critic's
mean and spread over all states (a critic that is flat there has learned nothing of the
reward). Measured on PostBot (``docs/learning_results.md``, "Why PostBot's greedy agent stays
in the editor"): the reward head read ~5-10 for the 11 of a delivery, the prior 0 even one step
ahead, and the critic 0.04 everywhere::

    python examples/reward_probe.py runs/postbot --min-reward 5 --steps 1200

With ``--replay`` it reads the same links on the rewarded steps held in the checkpoint's own
replay (the run's latest checkpoint keeps it) instead of playing: the data the world model was
trained on, so a reward that the agent has stopped reaching is still probed. Each rewarded row
is observed with the ``--context`` rows before it (the run's sequence length by default, cut at
its episode's start), as a training sequence would hold it; ``value_all`` is then the critic
over those windows' states::

    python examples/reward_probe.py runs/postbot --replay --min-reward 5
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
from pathlib import Path

import torch

from torchrl_dreamer.data import TimeMajorStorage, dreamer_inputs
from torchrl_dreamer.modules import DreamerPlayer, latent_of
from torchrl_dreamer.trainers.builder import make_env
from torchrl_dreamer.trainers.checkpoint import load_checkpoint, resolve_checkpoint
from torchrl_dreamer.trainers.evaluate import modules_from_checkpoint, playback_config


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", help="a run directory (its latest checkpoint) or a checkpoint")
    p.add_argument("--steps", type=int, default=1200, help="policy steps per console")
    p.add_argument("--envs", type=int, default=16, help="consoles played at once")
    p.add_argument("--min-reward", type=float, default=1.0,
                   help="a step whose real reward is at least this is probed")
    p.add_argument("--ahead", type=int, nargs="+", default=[1, 2, 4, 8],
                   help="imagined steps before each rewarded frame")
    p.add_argument("--samples", type=int, default=32, help="prior draws per imagination")
    p.add_argument("--greedy", action="store_true", help="the actor's mode instead of samples")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--replay", action="store_true",
                   help="probe the rewarded rows of the checkpoint's replay instead of playing")
    p.add_argument("--context", type=int, default=None,
                   help="with --replay: rows observed up to a rewarded row, itself included "
                        "(default: the run's sequence length)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.envs < 1 or args.samples < 1 or min(args.ahead) < 1:
        p.error("--steps, --envs, --samples and every --ahead must be >= 1")
    if args.context is not None and args.context < 2:
        p.error("--context must be >= 2 (a row before the rewarded one)")
    return args


@torch.no_grad()
def imagined_reward(wm, h: torch.Tensor, z: torch.Tensor, actions: list[torch.Tensor],
                    samples: int) -> float:
    """The reward head's mean after imagining ``actions`` (one-hot ``[A]`` each) from the
    posterior state ``(h, z)`` (``[D]``, ``[S*C]``), over ``samples`` prior draws."""
    h, z = h.expand(samples, -1).clone(), z.expand(samples, -1).clone()
    for a in actions:
        h, z = wm.rssm.img_step(h, z, a.expand(samples, -1))
    return float(wm.reward.mean(wm.reward(latent_of(z, h))).mean())


def load_agent(checkpoint: str, seed: int, envs: int):
    """``(run config, env of envs consoles, (world model, actor, critic))`` of a checkpoint,
    its config replayed with ``seed`` (the global generator seeded with it too)."""
    state = load_checkpoint(resolve_checkpoint(checkpoint))
    cfg = playback_config(state, seed)
    torch.manual_seed(seed)
    env = make_env(cfg, num_envs=envs)
    return cfg, env, modules_from_checkpoint(state, env, "cpu", critic=True)


@torch.no_grad()
def probe(checkpoint: str, *, steps: int = 1200, envs: int = 16, min_reward: float = 1.0,
          ahead: tuple[int, ...] = (1, 2, 4, 8), samples: int = 32, greedy: bool = False,
          seed: int = 1234) -> tuple[list[dict], dict]:
    """Play the checkpoint and probe every rewarded step; returns ``(rows, summary)``."""
    _, env, (wm, actor, critic) = load_agent(checkpoint, seed, envs)
    player = DreamerPlayer(wm, actor, num_envs=envs, greedy=greedy, share=True)
    # the last max(ahead) + 1 rows of (posterior h, z, the action taken there): row t's state
    # is the posterior of obs_t, the action the one chosen on it
    history: collections.deque = collections.deque(maxlen=max(ahead) + 1)
    values, rows, pending = [], [], []
    start = torch.zeros(envs, dtype=torch.long)  # the row where each console's episode began
    td = env.reset()
    for t in range(steps + 1):
        player(td)
        start[td["is_first"].reshape(envs)] = t
        h, z = player.h.clone(), player.z.clone()
        latent = latent_of(z, h)
        value = critic.mean(critic(latent))
        values.extend(value.tolist())
        # the rewards of the last step come with this frame: its posterior is the one to read
        if pending:
            posterior = wm.reward.mean(wm.reward(latent))
            rows_back = list(history)
            for i, real, before, began in pending:
                row = {"step": t, "env": i, "reward": real, "posterior": float(posterior[i]),
                       "value_before": before, "prior": {}}
                for k in ahead:  # from a state of the same episode only
                    if k <= len(history) and t - k >= began:
                        past = rows_back[-k:]
                        row["prior"][k] = imagined_reward(
                            wm, past[0][0][i], past[0][1][i], [p[2][i] for p in past], samples)
                rows.append(row)
        if t == steps:
            break
        action = player.prev_action.clone()
        history.append((h, z, action))
        td = env.step(td)
        reward = td["next", "reward"].reshape(envs)
        # with the episode's start as it is now: a reset in the next frame must not hide it
        pending = [(i, float(reward[i]), float(value[i]), int(start[i]))
                   for i in torch.nonzero(reward >= min_reward).flatten().tolist()]
        td = td.get("next")

    return rows, _summary(rows, values, ahead, console_steps=steps * envs)


def _summary(rows: list[dict], values: list[float], ahead: tuple[int, ...], **extra) -> dict:
    """Means of the probed rows and the critic's mean and spread over ``values``."""

    def mean(xs):
        return statistics.fmean(xs) if xs else None

    return {
        "rewarded_steps": len(rows), **extra,
        "reward": mean([r["reward"] for r in rows]),
        "posterior": mean([r["posterior"] for r in rows]),
        "prior": {k: mean([r["prior"][k] for r in rows if k in r["prior"]]) for k in ahead},
        "value_before": mean([r["value_before"] for r in rows]),
        "value_all": mean(values), "value_all_std": statistics.pstdev(values) if values else None,
    }


def load_replay(checkpoint: Path) -> TimeMajorStorage:
    """The replay a checkpoint holds (``replay/``: a run keeps it in its latest checkpoint)."""
    try:
        return TimeMajorStorage.from_dump(checkpoint / "replay")
    except FileNotFoundError:
        raise SystemExit(f"{checkpoint} holds no replay: --replay reads a run's latest checkpoint "
                         "(the older ones drop theirs), saved with checkpoint_replay on") from None


@torch.no_grad()
def probe_replay(checkpoint: str, *, min_reward: float = 1.0, ahead: tuple[int, ...] = (1, 2, 4, 8),
                 samples: int = 32, context: int | None = None,
                 seed: int = 1234) -> tuple[list[dict], dict]:
    """Probe every rewarded row of the checkpoint's replay; returns ``(rows, summary)``.

    Each row ``t`` of env ``i`` with ``reward >= min_reward`` is observed with the rows before
    it (``context`` in all, from its episode's start at most) and probed as in :func:`probe`:
    ``step`` is the row's absolute step in the replay.
    """
    cfg, env, (wm, _, critic) = load_agent(checkpoint, seed, 1)
    context = context or cfg.replay.seq_len
    n_act = int(env.action_spec.space.n)
    env.close()
    storage = load_replay(resolve_checkpoint(checkpoint))
    held = storage.chronological_rows()
    first_step = storage.total_steps - len(held)
    reward, is_first = storage.fields["reward"][held], storage.fields["is_first"][held]
    rows, values = [], []
    for s, i in torch.nonzero(reward >= min_reward).tolist():
        if s == 0:
            continue  # the oldest held row: nothing before it
        begin = max(0, s - context + 1)
        firsts = torch.nonzero(is_first[begin:s + 1, i]).flatten()
        if len(firsts):
            begin += int(firsts[-1])
        if begin == s:
            continue  # an episode's first row pays nothing; a window needs a row before it
        span = held[begin:s + 1].unsqueeze(1)  # [T, 1]: the window's rows of console i
        win = dreamer_inputs(storage.gather(span, torch.full_like(span, i)), num_actions=n_act)
        post = wm.rssm.observe(wm.embed(wm.preprocess({"pixels": win["pixels"]})),
                               win["prev_action"], win["is_first"])
        h, z = post["h"][:, 0], post["z"][:, 0]
        value = critic.mean(critic(latent_of(z, h))).flatten()
        values.extend(value.tolist())
        last = len(h) - 1
        # the actions taken from row last - k on: prev_action of the rows after it (no episode
        # start among them, so none is zeroed)
        taken = win["prev_action"][:, 0]
        row = {"step": first_step + s, "env": i, "reward": float(reward[s, i]),
               "posterior": float(wm.reward.mean(wm.reward(latent_of(z[last], h[last])))),
               "value_before": float(value[last - 1]), "prior": {}}
        for k in ahead:
            if k <= last:
                row["prior"][k] = imagined_reward(wm, h[last - k], z[last - k],
                                                  list(taken[last - k + 1:]), samples)
        rows.append(row)
    return rows, _summary(rows, values, ahead, held_steps=len(held) * storage.num_envs)


def main(argv: list[str] | None = None) -> dict:
    """Run the probe and print its JSON lines; returns the summary."""
    args = parse_args(argv)
    torch.set_num_threads(1)
    if args.replay:
        rows, summary = probe_replay(args.checkpoint, min_reward=args.min_reward,
                                     ahead=tuple(args.ahead), samples=args.samples,
                                     context=args.context, seed=args.seed)
    else:
        rows, summary = probe(args.checkpoint, steps=args.steps, envs=args.envs,
                              min_reward=args.min_reward, ahead=tuple(args.ahead),
                              samples=args.samples, greedy=args.greedy, seed=args.seed)
    for row in rows:
        print(json.dumps(row))
    print(json.dumps({"summary": summary}))
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])

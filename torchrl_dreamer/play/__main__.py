"""``python -m torchrl_dreamer.play ROM [--spec S]``: play a game, save start states, record
demonstrations (``docs/playing.md``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from torchrl_dreamer.play.sdl import KEYMAP


def build_parser() -> argparse.ArgumentParser:
    """The command line parser."""
    keys = ", ".join(f"{k.lower()}={v}" for k, v in KEYMAP.items())
    p = argparse.ArgumentParser(
        prog="python -m torchrl_dreamer.play",
        description="Play a Game Boy ROM at the agent's step granularity; record demonstrations "
                    "and save start states.",
        epilog=f"Keys: {keys}.")
    p.add_argument("rom", nargs="?", help="ROM file, or a registered task name such as maze")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--spec", help="task spec file (YAML/JSON): reward, episode end, actions")
    g.add_argument("--task", help="registered task name (e.g. maze, catch) for the ROM")
    p.add_argument("--state", help="savestate to start from")
    p.add_argument("--model", choices=("dmg", "cgb"), default=None,
                   help="console: dmg or cgb (Game Boy Color); default: the Color for a "
                        "Color-only ROM, else the DMG")
    p.add_argument("--record", metavar="FILE", help="write a demonstration file when play stops")
    p.add_argument("--save-state", metavar="FILE",
                   help="where F2 saves a state (default <ROM>.trdstate)")
    p.add_argument("--script", metavar="FILE",
                   help="play a script (one 'BUTTONS [xN]' line per env step) instead of the keyboard")
    p.add_argument("--headless", action="store_true", help="no window (needs --script)")
    p.add_argument("--actions", help="action set name or comma-separated actions (default: the task's)")
    p.add_argument("--frame-skip", type=int, default=None,
                   help="frames per env step (default: what training uses for the task: its "
                        "train defaults, else 8)")
    p.add_argument("--press-frames", type=int, default=None,
                   help="frames a button is held per step (default: with the default frame "
                        "skip, what training uses for the task: its spec's train: press_frames; "
                        "else min(8, frame skip))")
    p.add_argument("--noop-max", type=int, default=0,
                   help="random no-op frames before each episode (0)")
    p.add_argument("--max-episode-steps", type=int, default=None,
                   help="episode step limit (default: the task's; 0 = none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the episode start draws (0)")
    p.add_argument("--watch", action="append", default=[], metavar="[LABEL=]ADDR[:LEN[:ENC]]",
                   help="extra RAM value to show (repeatable)")
    p.add_argument("--scale", type=int, default=4, help="window scale (4 = 640x576)")
    p.add_argument("--speed", type=float, default=1.0, help="speed (1 = 59.73 fps)")
    p.add_argument("--view", choices=("full", "agent"), default="full",
                   help="show the console's screen or the 72x80 frame the agent sees")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many env steps")
    v = p.add_mutually_exclusive_group()
    v.add_argument("--verbose", action="store_true", default=None, help="print every step")
    v.add_argument("--quiet", dest="verbose", action="store_false", default=None,
                   help="print only rewards and episode ends")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    from torchrl_dreamer.envs.spec import TaskSpecError
    from torchrl_dreamer.play import ScriptError, play
    from torchrl_dreamer.play.sdl import NoDisplayError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.rom is None and args.task is None:
        parser.error("give a ROM (or a task name such as maze)")
    if args.headless and args.script is None:
        parser.error("--headless needs --script FILE (one 'BUTTONS [xN]' line per env step)")
    actions = args.actions
    if actions is not None and "," in actions:
        actions = [a.strip() for a in actions.split(",") if a.strip()]
    max_episode_steps = "task" if args.max_episode_steps is None else args.max_episode_steps
    try:
        play(args.rom, spec=args.spec, task=args.task, state=args.state,
             inputs=Path(args.script) if args.script else None, headless=args.headless,
             record=args.record, save_state=args.save_state, action_set=actions,
             frame_skip=args.frame_skip, press_frames=args.press_frames,
             max_episode_steps=max_episode_steps, seed=args.seed, noop_max=args.noop_max,
             watches=args.watch,
             scale=args.scale, speed=args.speed, view=args.view, max_steps=args.max_steps,
             verbose=args.verbose, model=args.model)
    except NoDisplayError as err:
        print(f"play: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except (TaskSpecError, ScriptError, FileNotFoundError, ValueError, ImportError) as err:
        print(f"play: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

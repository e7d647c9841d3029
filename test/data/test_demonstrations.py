"""Demonstrations: the file round trip, validation against the run, the human replay and the
mixing sampler (share, reproducibility, the collector's contract)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from torchrl_dreamer.collectors.protocols import Checkpointable, ReplayStorage, SequenceSampler
from torchrl_dreamer.data import ChronologicalSliceSampler, TimeMajorStorage, dreamer_schema
from torchrl_dreamer.data.demonstrations import (
    HUMAN,
    DemoMixedStorage,
    DemoMixingSampler,
    Demonstration,
    DemonstrationError,
    DemonstrationMismatchError,
    DemonstrationRecorder,
    MixedIndex,
    RunSignature,
    attach_demonstrations,
    demonstration_paths,
    demonstration_storage,
    load_demonstrations,
)
from torchrl_dreamer.data.schema import FieldSpec
from torchrl_dreamer.data.synthetic import SyntheticSteps
from torchrl_dreamer.envs import GameBoyEnv
from torchrl_dreamer.envs.tasks.maze import MazeTask
from torchrl_dreamer.play import play
from torchrl_dreamer.roms import rom_path

SHA = "ab" * 32


def synthetic_demo(t: int = 40, seed: int = 0, end_every: int = 13, task: str = "maze",
                   names: tuple[str, ...] = ("NOOP", "UP", "DOWN", "LEFT", "RIGHT")) -> Demonstration:
    """A consistent demonstration whose pixels encode (seed, row) so sampled rows are traceable."""
    g = torch.Generator().manual_seed(seed)
    is_first = torch.zeros(t, dtype=torch.bool)
    terminated = torch.zeros(t, dtype=torch.bool)
    is_first[0] = True
    for end in range(end_every - 1, t - 1, end_every):
        terminated[end] = True
        is_first[end + 1] = True
    pixels = torch.zeros(t, 1, 72, 20, dtype=torch.uint8)
    pixels[:, 0, 0, 0] = seed
    pixels[:, 0, 0, 1] = torch.arange(t, dtype=torch.uint8)
    reward = torch.where(is_first, 0.0, torch.rand(t, generator=g))
    return Demonstration(
        SHA, task, names, 24, 8, pixels=pixels,
        action=torch.randint(len(names), (t,), generator=g), reward=reward,
        terminated=terminated, truncated=torch.zeros(t, dtype=torch.bool), is_first=is_first,
        episode_id=(torch.cumsum(is_first.int(), 0) - 1).to(torch.int32), rom_title="TRLD MAZE")


def agent_storage(capacity: int = 300, envs: int = 4, schema=None) -> TimeMajorStorage:
    storage = TimeMajorStorage(capacity, envs, spec=schema or dreamer_schema())
    steps = SyntheticSteps(envs, torch.Generator().manual_seed(0))
    for _ in range(capacity):
        row = steps.step()
        if "control_mode" in storage.schema:
            row["control_mode"] = torch.zeros(envs, dtype=torch.int8)
        storage.write(row)
    return storage


# ------------------------------------------------------------------------------ the file
def test_round_trip_record_save_load_and_storage_rows(tmp_path):
    """record -> file -> load -> human replay: the sampled sequences are the recorded rows."""
    task = MazeTask(rom=rom_path("maze"), seed_values=[0])
    session = play(task=task, inputs=["LEFT", "UP x4", "RIGHT x5", "NOOP x3", "DOWN x2", "reset",
                                      "UP x6"], headless=True, record=tmp_path / "d.pt",
                   log=lambda line: None)
    recorded = session.demonstration()
    demo = Demonstration.load(tmp_path / "d.pt")
    for name in ("pixels", "action", "reward", "terminated", "truncated", "is_first", "episode_id"):
        assert torch.equal(getattr(demo, name), getattr(recorded, name)), name
    assert demo.signature == RunSignature.from_env(session.env)
    assert demo.meta["seed"] == 0 and demo.num_episodes == 3  # exit, deferred reset, R
    # terminal row 10, its deferred reset 11; the player's reset truncates row 15
    assert len(demo) == 23
    assert demo.terminated.nonzero().flatten().tolist() == [10]
    assert demo.truncated.nonzero().flatten().tolist() == [15]
    assert demo.is_first.nonzero().flatten().tolist() == [0, 11, 16]

    storage = demonstration_storage([demo, demo])
    assert storage.total_steps == 2 * len(demo) and storage.num_envs == 1
    f = storage.fields
    assert torch.equal(f["pixels"][: len(demo), 0], demo.pixels)
    assert torch.equal(f["action"][len(demo):, 0], demo.action)
    assert torch.equal(f["continue_"][:, 0], 1.0 - torch.cat([demo.terminated] * 2).float())
    assert f["episode_id"][:, 0].tolist() == demo.episode_id.tolist() + (demo.episode_id + 3).tolist()

    # sampled demonstration sequences are contiguous windows of the recording
    inner = ChronologicalSliceSampler(slice_len=8, generator=torch.Generator().manual_seed(1))
    mix = DemoMixingSampler(inner, storage, share=1.0)
    both = torch.cat([demo.pixels] * 2)
    for _ in range(20):
        data, info = mix.sample_sequences(agent_storage(), 4 * 8)
        assert info["mode"].tolist() == [HUMAN] * 4
        for b in range(4):
            s = int(info["start"][0, b])
            assert torch.equal(data["pixels"][:, b], both[s:s + 8])
            assert torch.equal(data["action"][:, b], torch.cat([demo.action] * 2)[s:s + 8])


def test_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        Demonstration.load(tmp_path / "none.pt")
    torch.save({"weights": torch.zeros(3)}, tmp_path / "model.pt")
    with pytest.raises(DemonstrationError, match="not a torchrl_dreamer demonstration"):
        Demonstration.load(tmp_path / "model.pt")
    d = synthetic_demo().to_dict()
    d["version"] = 99
    torch.save(d, tmp_path / "v99.pt")
    with pytest.raises(DemonstrationError, match="version 99"):
        Demonstration.load(tmp_path / "v99.pt")
    d = synthetic_demo().to_dict()
    d["action"] = d["action"][:-1]
    torch.save(d, tmp_path / "short.pt")
    with pytest.raises(DemonstrationError, match="action has 39 rows"):
        Demonstration.load(tmp_path / "short.pt")
    d = synthetic_demo().to_dict()
    d["is_first"][13] = False  # the row after an episode end must start the next one
    with pytest.raises(DemonstrationError, match="row 13 follows an episode end"):
        Demonstration.from_dict(d)
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no \\*.pt"):
        demonstration_paths(empty)


def test_validation_errors_name_what_differs(tmp_path):
    demo = synthetic_demo()
    path = demo.save(tmp_path / "demo.pt")
    run = demo.signature
    load_demonstrations(path, run)  # the recording's own run loads
    cases = {
        "rom": replace(run, rom_sha256="cd" * 32),
        "actions": replace(run, action_names=("NOOP", "A", "B", "START", "UP", "DOWN", "LEFT",
                                              "RIGHT")),
        "frame_skip": replace(run, frame_skip=12),
        "press_frames": replace(run, press_frames=4),
        "task": replace(run, task="maze-sparse"),
    }
    words = {"rom": "another ROM", "actions": "action set", "frame_skip": "frame_skip=24",
             "press_frames": "press_frames=8", "task": "task 'maze'"}
    for field, other in cases.items():
        with pytest.raises(DemonstrationMismatchError) as err:
            load_demonstrations(path, other)
        assert err.value.field == field
        assert words[field] in str(err.value) and str(path) in str(err.value)
    load_demonstrations(path, cases["task"], check_task=False)


def test_validation_against_a_real_env(tmp_path):
    env = GameBoyEnv("maze", 1)
    rec = DemonstrationRecorder(env)
    rec.begin(env.reset())
    for a in (1, 2, 3):
        rec.step(a, env.fast_step(torch.tensor([a])))
    path = rec.save(tmp_path / "maze.pt")
    assert len(load_demonstrations(path, env=env)) == 1
    with pytest.raises(DemonstrationMismatchError, match="action set") as err:
        load_demonstrations(path, env=GameBoyEnv("maze", 1, action_set="minimal"))
    assert err.value.field == "actions"
    with pytest.raises(DemonstrationMismatchError, match="frame_skip") as err:
        load_demonstrations(path, env=GameBoyEnv("maze", 1, frame_skip=12))
    assert err.value.field == "frame_skip"
    with pytest.raises(DemonstrationMismatchError, match="another ROM") as err:
        load_demonstrations(path, env=GameBoyEnv("catch", 1, action_set="dpad"))
    assert err.value.field == "rom"
    with pytest.raises(DemonstrationMismatchError, match="task 'maze'") as err:
        load_demonstrations(path, env=GameBoyEnv("maze-sparse", 1))
    assert err.value.field == "task"


def test_a_task_with_an_exploration_bonus_records_and_replays_it(tmp_path):
    """A spec with an exploration bonus: the recording keeps the env's ``bonus`` beside the
    reward, the file round-trips it, the replay check compares it and a replay with a ``bonus``
    field gets it (zeros from a recording without one)."""
    from torchrl_dreamer.data.demonstrations import replay_demonstration
    from torchrl_dreamer.envs import load_task_spec

    obj = {"actions": "dpad", "rom": {"logo": False}, "start": {"macro": [{"wait": 30}]},
           "reward": [{"kind": "delta", "address": 0xC0F0}],
           "exploration": {"ram": {"addresses": [0xC0F0], "scale": 0.5}}}

    def env():
        return GameBoyEnv(load_task_spec(obj, rom=rom_path("catch")), 1, seed=0, noop_max=0)

    rec_env = env()
    rec = DemonstrationRecorder(rec_env)
    rec.begin(rec_env.reset())
    for a in (1, 2, 0, 3):
        rec.step(a, rec_env.fast_step(torch.tensor([a])))
    demo = Demonstration.load(rec.save(tmp_path / "bonus.pt"))
    assert demo.bonus is not None and demo.bonus.dtype == torch.float32
    assert demo.bonus[0] == 0 and bool((demo.bonus[1:] > 0).all())  # catch's counter moves
    replay_demonstration(demo, env())  # the bonus is compared with the replay's
    schema = dict(dreamer_schema(), bonus=FieldSpec((), torch.float32))
    st = demonstration_storage([demo], schema)
    assert torch.equal(st.fields["bonus"][:, 0], demo.bonus)
    old = replace(demo, bonus=None)
    assert demonstration_storage([old], schema).fields["bonus"].abs().sum() == 0
    with pytest.raises(DemonstrationError, match="bonus must be float32"):
        replace(demo, bonus=demo.bonus[:-1]).check()


# ------------------------------------------------------------------------------ the mixing
@pytest.mark.parametrize("share,batch", [(0.25, 8), (0.3, 10), (0.5, 5), (0.0, 4), (1.0, 4)])
def test_demonstrations_are_sampled_at_the_configured_share(share, batch):
    schema = dict(dreamer_schema(), control_mode=FieldSpec((), torch.int8))
    agent = agent_storage(schema=schema)
    demos = demonstration_storage([synthetic_demo(seed=1), synthetic_demo(seed=2)], schema)
    assert bool((demos.fields["control_mode"] == HUMAN).all())
    inner = ChronologicalSliceSampler(slice_len=8, generator=torch.Generator().manual_seed(0))
    mixed = DemoMixedStorage.over(agent, demos)
    mix = DemoMixingSampler(inner, demos, share)
    want = round(share * batch)
    rows = {0: 0, HUMAN: 0}
    batches = 100
    for _ in range(batches):
        index, info = mix.sample(mixed, batch * 8)
        assert isinstance(index, MixedIndex) and index.num_demo == want
        data = mixed.get(index)  # what the collector does with the sampler's index
        assert data.batch_size == torch.Size([8, batch])
        mode = data["control_mode"]
        assert torch.equal(mode, info["mode"].expand(8, batch))  # info says the source
        for m in rows:
            rows[m] += int((mode == m).sum())
    assert rows[HUMAN] == batches * want * 8
    assert rows[0] == batches * (batch - want) * 8


def test_mixing_is_reproducible_and_checkpointable():
    demos = demonstration_storage([synthetic_demo()])

    def draw(seed: int, n: int = 5, state=None):
        inner = ChronologicalSliceSampler(slice_len=8, generator=torch.Generator().manual_seed(seed))
        mix = DemoMixingSampler(inner, demos, 0.5)
        if state is not None:
            mix.load_state_dict(state)
        out = [mix.sample(agent_storage(64), 6 * 8)[1]["start"] for _ in range(n)]
        return out, mix

    a, mix = draw(0)
    b, _ = draw(0)
    c, _ = draw(1)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))
    # a state dict taken mid-run resumes the same draws (the generator is shared)
    inner = ChronologicalSliceSampler(slice_len=8, generator=torch.Generator().manual_seed(0))
    m = DemoMixingSampler(inner, demos, 0.5)
    m.sample(agent_storage(64), 48)
    state = m.state_dict()
    after = [m.sample(agent_storage(64), 48)[1]["start"] for _ in range(3)]
    resumed, _ = draw(7, 3, state)
    assert all(torch.equal(x, y) for x, y in zip(after, resumed))
    # a plain sampler state (a checkpoint from a run without demonstrations) loads too
    m.load_state_dict(inner.state_dict())


def test_mixing_meets_the_collectors_contract():
    agent = TimeMajorStorage(128, 4, spec=dreamer_schema(), safety_margin=8, auto_commit=False)
    demos = demonstration_storage([synthetic_demo()])
    inner = ChronologicalSliceSampler(slice_len=8, generator=torch.Generator().manual_seed(0))
    mixed = DemoMixedStorage.over(agent, demos)
    mix = DemoMixingSampler(inner, demos, 0.25)
    assert isinstance(mixed, ReplayStorage) and isinstance(mixed, TimeMajorStorage)
    assert isinstance(mix, SequenceSampler) and isinstance(mix, Checkpointable)
    assert mix.resolve(4 * 8) == (4, 8) and mix.generator is inner.generator
    assert mix.n_samples is None and mix.time_major
    # writes through the mixed handle are the agent storage's writes
    steps = SyntheticSteps(4, torch.Generator().manual_seed(0))
    for _ in range(20):
        mixed.write(steps.step())
    mixed.commit(19)
    assert (agent.total_steps, agent.committed_t) == (20, 19)
    assert mixed.agent_storage.total_steps == 20
    with pytest.raises(ValueError, match="fewer than one sequence"):
        DemoMixingSampler(ChronologicalSliceSampler(slice_len=64, generator=torch.Generator()),
                          demos, 0.25)
    with pytest.raises(ValueError, match="share"):
        DemoMixingSampler(inner, demos, 1.5)
    with pytest.raises(TypeError, match="over"):
        DemoMixedStorage(16, 1)
    with pytest.raises(ValueError, match="schema"):
        DemoMixedStorage.over(TimeMajorStorage(16, 1, spec=dreamer_schema(
            action_shape=(5,), action_dtype=torch.float32)), demos)


def test_one_hot_action_schema_and_unknown_fields():
    demo = synthetic_demo(t=20)
    st = demonstration_storage([demo], dreamer_schema(action_shape=(5,), action_dtype=torch.float32))
    assert torch.equal(st.fields["action"][:, 0].argmax(-1), demo.action)
    with pytest.raises(DemonstrationError, match="'vector'"):
        demonstration_storage([demo], dict(dreamer_schema(), vector=FieldSpec((3,), torch.float32)))


def test_attach_demonstrations_with_the_async_collector(tmp_path):
    """The collector takes the attached pair in place of its storage and sampler, unchanged."""
    from torchrl_dreamer.collectors import AsyncCollectorConfig, AsyncDreamerCollector
    from torchrl_dreamer.modules import DreamerPlayer, make_dreamer
    from torchrl_dreamer.objectives import DreamerV3Learner

    task = MazeTask(rom=rom_path("maze"), seed_values=[0])
    play(task=task, inputs=["LEFT", "UP x4", "RIGHT x5", "UP x20"], headless=True,
         record=tmp_path / "demos" / "a.pt", log=lambda line: None)
    demo = Demonstration.load(tmp_path / "demos" / "a.pt")

    env = GameBoyEnv("maze", num_envs=4)
    storage = TimeMajorStorage(128, 4, spec=dreamer_schema(), safety_margin=8, auto_commit=False)
    sampler = ChronologicalSliceSampler(slice_len=8, generator=torch.Generator().manual_seed(0))
    storage, sampler = attach_demonstrations(storage, sampler, tmp_path / "demos", share=0.5,
                                             env=env)
    seen = []

    class Recording(DreamerV3Learner):
        def update(self, batch):
            seen.append(batch["pixels"].clone())
            return super().update(batch)

    wm, actor, critic = make_dreamer("tiny", {"pixels": "packed2"}, env.action_spec.space.n)
    cfg = AsyncCollectorConfig(seq_len=8, batch_size=2, min_ready_steps=8, safety_margin=8,
                               commit_stride=4, learning_starts=32, replay_ratio=0.1)
    collector = AsyncDreamerCollector(env, storage, sampler, DreamerPlayer(wm, actor, num_envs=4),
                                      Recording(wm, actor, critic, "fast-pixels"), cfg,
                                      total_frames=64, bundle_dir=tmp_path / "bundle")
    try:
        for _ in collector:
            pass
    finally:
        collector.shutdown()
    assert seen, "no gradient step ran"
    windows = [demo.pixels[s:s + 8] for s in range(len(demo) - 7)]
    for batch in seen:  # [T=8, B=2]: one agent sequence, then one demonstration sequence
        assert any(torch.equal(batch[:, 1], w) for w in windows)

"""The critic's replay-value loss (``replay_value_scale``, DreamerV3 2024's ``repval``): its
targets against a direct recursion, its place in the critic loss and the learner, and its
setting from the command line."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from torchrl_dreamer.modules import PRESETS, make_dreamer
from torchrl_dreamer.modules.functional import replay_lambda_returns
from torchrl_dreamer.objectives import (
    DreamerV3ActorLoss,
    DreamerV3CriticLoss,
    DreamerV3Learner,
    DreamerV3LossConfig,
)

SMALL = PRESETS["tiny"].with_(deter=16, hidden=16, stoch=4, classes=4, cnn_mult=2, cnn_stages=2)


def _direct(reward, cont, is_first, boot, gamma, lam):
    """The returns row by row: a transition into a row that starts an episode is not in the
    data, so a return never looks past it."""
    K = reward.shape[0]
    R = [None] * K
    R[K - 1] = boot[K - 1]
    for t in range(K - 2, -1, -1):
        nxt = boot[t + 1] if (t + 2 < K and is_first[t + 2]) else \
            (1 - lam) * boot[t + 1] + lam * R[t + 1]
        R[t] = reward[t + 1] + gamma * cont[t + 1] * nxt
    weight = [0.0 if is_first[t + 1] else 1.0 for t in range(K - 1)]
    return torch.stack(R[:-1]), torch.tensor(weight)


def test_replay_returns_match_a_direct_recursion_across_episode_ends():
    g = torch.Generator().manual_seed(0)
    K = 9
    reward, boot = torch.randn(K, generator=g), torch.randn(K, generator=g)
    cont = torch.tensor([1.0, 1, 1, 0, 1, 1, 1, 1, 1])  # row 3 ends its episode...
    is_first = torch.tensor([1, 0, 0, 0, 1, 0, 0, 1, 0], dtype=torch.bool)  # ...row 4 starts one
    R, w = replay_lambda_returns(reward, cont, is_first, boot, gamma=0.9, lmbda=0.8)
    want_R, want_w = _direct(reward, cont, is_first, boot, 0.9, 0.8)
    torch.testing.assert_close(R, want_R)
    torch.testing.assert_close(w, want_w)
    assert w.tolist() == [1, 1, 1, 0, 1, 1, 0, 1]  # rows 3 and 6: their next row starts anew
    # a terminal row pays its reward and nothing after it
    torch.testing.assert_close(R[2], reward[3])
    # batched [K, B] equals column by column
    Rb, wb = replay_lambda_returns(torch.stack([reward, boot], 1), torch.ones(K, 2),
                                   torch.stack([is_first, is_first], 1),
                                   torch.stack([boot, reward], 1), 0.9, 0.8)
    torch.testing.assert_close(Rb[:, 0], _direct(reward, torch.ones(K), is_first, boot, 0.9, 0.8)[0])
    with pytest.raises(ValueError, match="one \\[K, ...\\] shape"):
        replay_lambda_returns(reward, cont[:-1], is_first, boot, 0.9)


def _posterior(wm, T=6, B=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    is_first = torch.zeros(T, B, dtype=torch.bool)
    is_first[0], is_first[3, 1] = True, True
    return TensorDict({
        "h": torch.randn(T, B, wm.rssm.deter, generator=g),
        "z": torch.randn(T, B, wm.latent_dim - wm.rssm.deter, generator=g).softmax(-1),
        "continue_": torch.ones(T, B), "reward": torch.randn(T, B, generator=g),
        "is_first": is_first}, [T, B])


@pytest.mark.parametrize("imagine_last", [0, 4])
def test_the_critic_loss_adds_the_replay_term_on_the_start_states(imagine_last):
    torch.manual_seed(0)
    wm, actor, critic = make_dreamer(SMALL, {"obs": ("vector", 5)}, 3)
    cfg = DreamerV3LossConfig().with_(horizon=3, imagine_last=imagine_last,
                                      replay_value_scale=0.3)
    post = _posterior(wm)
    closs = DreamerV3CriticLoss(critic, cfg)
    closs.update_slow_critic()
    imag = DreamerV3ActorLoss(wm, actor, critic, cfg)(post)["imagination"]
    rows = imag["replay"]
    K = imagine_last or 6
    assert rows.batch_size == torch.Size([K, 3])
    torch.testing.assert_close(rows["reward"], post["reward"][-K:])
    torch.testing.assert_close(rows["latent"], torch.cat([post["z"], post["h"]], -1)[-K:])
    torch.testing.assert_close(rows["boot"], imag["lambda_return"][0].reshape(K, 3))
    out = closs(imag)
    # the reused critic outputs equal a fresh critic pass on the replay latents
    fresh = closs.replay_loss(rows)
    torch.testing.assert_close(out["critic_replay_loss"], fresh.detach())
    without = DreamerV3CriticLoss(critic, cfg.with_(replay_value_scale=0.0))
    without.slow_critic.load_state_dict(closs.slow_critic.state_dict())
    base = without(imag)
    assert "critic_replay_loss" not in base.keys()
    torch.testing.assert_close(out["loss_critic"],
                               base["loss_critic"] + 0.3 * out["critic_replay_loss"])


def test_the_learner_trains_with_the_replay_term_and_refuses_bad_input():
    torch.manual_seed(0)
    wm, actor, critic = make_dreamer(SMALL, {"obs": ("vector", 5)}, 3)
    learner = DreamerV3Learner(wm, actor, critic,
                               DreamerV3LossConfig().with_(horizon=3, replay_value_scale=0.3))
    T, B = 6, 2
    g = torch.Generator().manual_seed(1)
    batch = TensorDict({"obs": torch.randn(T, B, 5, generator=g),
                        "action": torch.randint(3, (T, B), generator=g),
                        "reward": torch.randn(T, B, generator=g),
                        "is_first": torch.zeros(T, B, dtype=torch.bool),
                        "continue_": torch.ones(T, B)}, [T, B])
    before = [p.detach().clone() for p in critic.parameters()]
    metrics = learner.update(batch)
    assert torch.isfinite(metrics["critic_replay_loss"]) and metrics["critic_replay_loss"] > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, critic.parameters()))
    with pytest.raises(ValueError, match="replay_value_scale must be >= 0"):
        DreamerV3LossConfig(replay_value_scale=-0.1)
    flat = TensorDict({"h": torch.zeros(4, wm.rssm.deter),
                       "z": torch.zeros(4, wm.latent_dim - wm.rssm.deter),
                       "continue_": torch.ones(4)}, [4])
    with pytest.raises(ValueError, match="time-major"):
        DreamerV3ActorLoss(wm, actor, critic, learner.config)(flat)


def test_the_setting_reaches_the_run_loss_config():
    from torchrl_dreamer.train import build_parser, config_from_args

    args = build_parser("train").parse_args(["--loss.replay-value-scale", "0.3"])
    assert config_from_args(args).loss_config().replay_value_scale == 0.3
    assert config_from_args(build_parser("train").parse_args([])).loss_config() \
        .replay_value_scale == 0.0

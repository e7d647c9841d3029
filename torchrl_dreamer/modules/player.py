"""``DreamerPlayer``: the acting-time filter + policy for a batch of environments.

Holds per-env ``(h, z, prev_action)``; on ``is_first`` it resets those envs to the initial state
(zero action, ``h = tanh(h0)``, ``z`` = prior mode), then runs one posterior step and picks an
action. Runs under ``torch.no_grad`` with masked updates only (no host sync, CUDA-graph
friendly). Why not ``torchrl.modules.RSSMStateEstimatorV3``: it resets to zeros and expects
TorchRL's RSSM modules, not our learnable-initial-state RSSM.

Weights: by default the player owns *copies* of the learner's modules so that acting (e.g. on
another CUDA stream or thread) never reads half-updated parameters; call
``player.load_from(world_model, actor)`` after learner updates to copy weights in place (no
reallocation, safe under CUDA graphs). Pass ``share=True`` to act with the learner's modules.

Randomness: the player draws its posterior samples and actions from a generator of its own, so
that acting never touches the global generator the learner draws from. On CUDA that is required,
not only tidy: a captured learner (``capture=True``) registers the device's default generator
with its CUDA graph while capturing, and a draw from it by an acting thread during that capture
fails ("Offset increment outside graph capture"). It also keeps the actions of the threaded
backends independent of how the two threads interleave.
"""

from __future__ import annotations

import copy

import torch
from tensordict import TensorDictBase
from torch import nn

from torchrl_dreamer.modules.heads import DreamerV3Actor, one_hot_actions
from torchrl_dreamer.modules.latent import latent_of
from torchrl_dreamer.modules.world_model import WorldModel

__all__ = ["DreamerPlayer", "own_generator"]


def own_generator(device: torch.device | str) -> torch.Generator | None:
    """A new generator on ``device``, seeded from the global CPU generator (so repeatable under
    ``torch.manual_seed``); None on a device without generators (``meta``), where nothing is
    drawn.

    Example:
        >>> _ = torch.manual_seed(0)
        >>> a = torch.rand(2, generator=own_generator("cpu"))
        >>> _ = torch.manual_seed(0)
        >>> bool((a == torch.rand(2, generator=own_generator("cpu"))).all())
        True
    """
    device = torch.device(device)
    if device.type not in ("cpu", "cuda"):
        return None
    seed = int(torch.randint(0, 2**62, (1,)).item())
    return torch.Generator(device=device).manual_seed(seed)


class DreamerPlayer(nn.Module):
    """Batched DreamerV3 policy with recurrent state.

    Args:
        world_model: the learner's :class:`WorldModel`. actor: the learner's actor.
        num_envs: number of environments (state rows).
        greedy: take the actor's mode instead of sampling.
        share: use the given modules directly instead of private copies.
        action_key / is_first_key: TensorDict keys read/written by ``forward``.
        action_format: ``"index"`` (int64 ``[N]``, discrete only) or ``"one_hot"`` (float ``[N, A]``;
            the continuous action for continuous actors).
        generator: the generator the player samples from, on the modules' device. By default a
            new one, seeded from the global (CPU) generator when the player is built, so that
            ``torch.manual_seed`` still makes a run repeatable.

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_dreamer.modules import make_dreamer
        >>> wm, actor, _ = make_dreamer("tiny", {"obs": ("vector", 3)}, action_dim=2)
        >>> player = DreamerPlayer(wm, actor, num_envs=4)
        >>> td = TensorDict({"obs": torch.zeros(4, 3),
        ...                  "is_first": torch.ones(4, dtype=torch.bool)}, [4])
        >>> player(td)["action"].shape
        torch.Size([4])
    """

    def __init__(
        self,
        world_model: WorldModel,
        actor: DreamerV3Actor,
        num_envs: int,
        greedy: bool = False,
        share: bool = False,
        action_key: str = "action",
        is_first_key: str = "is_first",
        action_format: str = "index",
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if action_format not in ("index", "one_hot"):
            raise ValueError(f"action_format must be 'index' or 'one_hot', got {action_format!r}")
        if action_format == "index" and not actor.discrete:
            raise ValueError("action_format='index' needs a discrete actor; use 'one_hot'")
        self.world_model = world_model if share else copy.deepcopy(world_model)
        self.actor = actor if share else copy.deepcopy(actor)
        for p in list(self.world_model.parameters()) + list(self.actor.parameters()):
            if not share:
                p.requires_grad_(False)
        self.num_envs, self.greedy = num_envs, greedy
        self.action_key, self.is_first_key, self.action_format = (
            action_key,
            is_first_key,
            action_format,
        )
        rssm = self.world_model.rssm
        dev = rssm.h0.device
        self.register_buffer("h", torch.zeros(num_envs, rssm.deter, device=dev))
        self.register_buffer("z", torch.zeros(num_envs, rssm.stoch_flat, device=dev))
        self.register_buffer("prev_action", torch.zeros(num_envs, actor.action_dim, device=dev))
        self.generator = generator if generator is not None else own_generator(dev)
        self.init_states()

    def get_extra_state(self) -> dict:
        """The sampling generator's state, saved with the player's ``state_dict`` so that a
        resumed run draws the same actions as one that never stopped."""
        return {} if self.generator is None else {"generator": self.generator.get_state()}

    def set_extra_state(self, state: dict) -> None:
        """Restore what :meth:`get_extra_state` returned."""
        if self.generator is not None and "generator" in state:
            self.generator.set_state(state["generator"])

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """``nn.Module.load_state_dict``; a state saved before the player kept its generator
        state (no ``_extra_state`` entry) loads too, leaving the generator as it is."""
        if "_extra_state" not in state_dict:
            state_dict = {**state_dict, "_extra_state": self.get_extra_state()}
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    @torch.no_grad()
    def load_from(self, world_model: WorldModel, actor: DreamerV3Actor) -> None:
        """Copy the learner's current weights into the player's modules, in place."""
        for dst, src in ((self.world_model, world_model), (self.actor, actor)):
            if dst is src:
                continue
            d, s = list(dst.state_dict().values()), list(src.state_dict().values())
            if len(d) != len(s):
                raise ValueError("load_from: module structures differ from the player's")
            torch._foreach_copy_(d, s)

    @torch.no_grad()
    def init_states(self, mask: torch.Tensor | None = None) -> None:
        """Reset the state of envs where ``mask`` ``[N]`` is True (all envs when None)."""
        h0, z0 = self.world_model.rssm.initial_state(())
        if mask is None:
            self.h.copy_(h0.expand_as(self.h))
            self.z.copy_(z0.expand_as(self.z))
            self.prev_action.zero_()
            return
        m = mask.reshape(-1, 1).to(self.h.device)
        self.h.copy_(torch.where(m, h0, self.h))
        self.z.copy_(torch.where(m, z0, self.z))
        self.prev_action.masked_fill_(m, 0.0)

    @torch.no_grad()
    def act(
        self, obs: dict[str, torch.Tensor], is_first: torch.Tensor | None = None
    ) -> torch.Tensor:
        """One step for all envs: reset where ``is_first``, filter ``obs``, return the action."""
        if is_first is not None:
            self.init_states(is_first.reshape(-1).bool())
        wm = self.world_model
        embed = wm.embed(wm.preprocess(obs))
        h, z, _ = wm.rssm.obs_step(self.h, self.z, self.prev_action, embed,
                                   generator=self.generator)
        latent = latent_of(z, h)
        action = self.actor.act(latent, self.greedy, self.generator)
        self.h.copy_(h)
        self.z.copy_(z)
        self.prev_action.copy_(action)
        if self.action_format == "index":
            return action.argmax(-1)
        return action

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Read observations and ``is_first`` from ``tensordict``, write the action into it."""
        obs = {k: tensordict.get(k) for k in self.world_model.obs_keys}
        is_first = tensordict.get(self.is_first_key, None)
        tensordict.set(self.action_key, self.act(obs, is_first))
        return tensordict

    @staticmethod
    def to_one_hot(action: torch.Tensor, action_dim: int) -> torch.Tensor:
        """Index actions -> one-hot float (helper for callers feeding actions back)."""
        return one_hot_actions(action, action_dim)

"""The DreamerV3 world model container and the size presets (XS..XL, ``tiny``).

``DreamerV3Config`` holds the sizes; ``make_dreamer(config, obs, action_dim)`` builds the three
trained parts ``(world_model, actor, critic)``. Parameter counts of XS..XL match the reference
table (Atari 64x64x3, 18 actions): e.g. XS 8.27M (world model 7.54M), S 17.94M.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from torchrl_dreamer.modules.encoders import (
    ImageDecoder,
    ImageEncoder,
    Packed2Encoder,
    VectorDecoder,
    VectorEncoder,
)
from torchrl_dreamer.modules.heads import ContinueHead, DreamerV3Actor, DreamerV3Critic, TwoHotHead
from torchrl_dreamer.modules.rssm import RSSM, Kernel

__all__ = ["DreamerV3Config", "PRESETS", "WorldModel", "make_dreamer", "ObsSpec"]

# obs key -> "packed2" | ("image", (C, H, W)) | ("vector", D)
ObsSpec = dict


@dataclass(frozen=True)
class DreamerV3Config:
    """Network sizes of a DreamerV3 agent (see ``PRESETS``).

    Attributes:
        deter: GRU size. hidden: MLP width (``dense_units``). mlp_layers: layers of every MLP
        head (reward, continue, actor, critic, vector enc/dec). cnn_mult: CNN channel multiplier
        (channels ``[1, 2, 4, 8] * mult``). stoch, classes: discrete latent shape.
        unimix: uniform mix for latents and the discrete actor. cnn_stages: strided stages.
        cnn_stem: ``"conv"`` (reference) or ``"space_to_depth"`` (first stage replaced by a
        2x2 pixel unshuffle; see :class:`ImageEncoder`).
        ac_hidden, ac_layers: width and depth of the actor and critic MLPs (``None``: ``hidden``
        and ``mlp_layers``, as in DreamerV3). Widening them costs little (they only see the
        latent, never pixels). Why it exists and what it gave: ``docs/decisions/dreamer_options.md``.
    """

    deter: int = 512
    hidden: int = 512
    mlp_layers: int = 2
    cnn_mult: int = 32
    stoch: int = 32
    classes: int = 32
    unimix: float = 0.01
    cnn_stages: int = 4
    cnn_stem: str = "conv"
    ac_hidden: int | None = None
    ac_layers: int | None = None

    def with_(self, **kwargs) -> DreamerV3Config:
        """Copy with some fields changed, e.g. ``PRESETS["S"].with_(deter=256)``."""
        return replace(self, **kwargs)


#: Model size presets by name: ``XS``, ``S``, ``M``, ``L``, ``XL`` (DreamerV3 paper sizes),
#: ``tiny`` and ``tiny-wide`` (for CPU runs, :data:`CPU_PRESETS`).
PRESETS: dict[str, DreamerV3Config] = {
    "XS": DreamerV3Config(deter=256, hidden=256, mlp_layers=1, cnn_mult=24),
    "S": DreamerV3Config(deter=512, hidden=512, mlp_layers=2, cnn_mult=32),
    "M": DreamerV3Config(deter=1024, hidden=640, mlp_layers=3, cnn_mult=48),
    "L": DreamerV3Config(deter=2048, hidden=768, mlp_layers=4, cnn_mult=64),
    "XL": DreamerV3Config(deter=4096, hidden=1024, mlp_layers=5, cnn_mult=96),
    # CPU preset: a full B16xT32 packed2 update in ~0.3-0.45 s on one core (docs/dreamer.md).
    # cnn_mult 8, not 4: at 4 the world model needed ~2x the gradient steps to reconstruct the
    # maze player (a 6x6-pixel ring), see docs/learning_results.md.
    "tiny": DreamerV3Config(
        deter=128,
        hidden=128,
        mlp_layers=1,
        cnn_mult=8,
        stoch=16,
        classes=16,
        cnn_stem="space_to_depth",
    ),
}
# ``tiny`` with twice the GRU and MLP width: 1.6x the update time on one core (docs/dreamer.md)
PRESETS["tiny-wide"] = PRESETS["tiny"].with_(deter=256, hidden=256)


#: The presets sized for CPU runs: their runs default to the ``fast`` loss and learner presets.
CPU_PRESETS: tuple[str, ...] = ("tiny", "tiny-wide")


def _make_encoder(kind, cfg: DreamerV3Config) -> nn.Module:
    if kind == "packed2":
        return Packed2Encoder(mult=cfg.cnn_mult, stages=cfg.cnn_stages, stem=cfg.cnn_stem)
    if isinstance(kind, tuple) and len(kind) == 2 and kind[0] == "image":
        return ImageEncoder(tuple(kind[1]), cfg.cnn_mult, cfg.cnn_stages, cfg.cnn_stem)
    if isinstance(kind, tuple) and len(kind) == 2 and kind[0] == "vector":
        return VectorEncoder(int(kind[1]), cfg.hidden, cfg.mlp_layers)
    raise ValueError(
        f"unknown observation kind {kind!r}; use 'packed2', ('image', (C, H, W)) or ('vector', D)"
    )


class WorldModel(nn.Module):
    """Encoders, RSSM, decoders, reward and continue heads of DreamerV3.

    Attributes:
        encoders / decoders: ``nn.ModuleDict`` keyed by observation key (TensorDict keys with
            nested keys joined by ``"."`` are not supported: use flat keys).
        rssm: :class:`RSSM`. reward: :class:`TwoHotHead`. cont: :class:`ContinueHead`.

    ``kernel`` (keyword only) is the RSSM's step implementation, ``"auto"``, ``"eager"`` or
    ``"fused"`` (see :class:`RSSM`).
    """

    def __init__(
        self, obs: ObsSpec, action_dim: int, cfg: DreamerV3Config, *, kernel: Kernel = "auto"
    ) -> None:
        super().__init__()
        if not obs:
            raise ValueError(
                "obs must name at least one observation key, e.g. {'pixels': 'packed2'}"
            )
        self.cfg, self.action_dim = cfg, action_dim
        self.obs_keys = list(obs)
        self.encoders = nn.ModuleDict({k: _make_encoder(v, cfg) for k, v in obs.items()})
        embed = sum(e.out_features for e in self.encoders.values())
        self.rssm = RSSM(
            action_dim, embed, cfg.deter, cfg.hidden, cfg.stoch, cfg.classes, cfg.unimix,
            kernel=kernel,
        )
        latent = self.rssm.latent_dim
        dec = {}
        for k, e in self.encoders.items():
            if isinstance(e, ImageEncoder):
                dec[k] = ImageDecoder(latent, e.shape, cfg.cnn_mult, cfg.cnn_stages, cfg.cnn_stem)
            else:
                dec[k] = VectorDecoder(latent, e.in_features, cfg.hidden, cfg.mlp_layers)
        self.decoders = nn.ModuleDict(dec)
        self.reward = TwoHotHead(latent, cfg.hidden, cfg.mlp_layers)
        self.cont = ContinueHead(latent, cfg.hidden, cfg.mlp_layers)

    @property
    def latent_dim(self) -> int:
        return self.rssm.latent_dim

    def preprocess(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Per-key float inputs (also the reconstruction targets)."""
        missing = [k for k in self.obs_keys if k not in obs]
        if missing:
            raise KeyError(f"observation keys {missing} missing from the batch")
        return {k: self.encoders[k].preprocess(obs[k]) for k in self.obs_keys}

    def embed(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Concatenated embeddings of preprocessed observations."""
        return torch.cat([self.encoders[k](inputs[k]) for k in self.obs_keys], -1)

    def decode(self, latent: torch.Tensor) -> dict[str, torch.Tensor]:
        """Reconstructions in preprocessed space, per observation key."""
        return {k: d(latent) for k, d in self.decoders.items()}


def make_dreamer(
    config: DreamerV3Config | str,
    obs: ObsSpec,
    action_dim: int,
    discrete: bool = True,
    *,
    kernel: Kernel = "auto",
) -> tuple[WorldModel, DreamerV3Actor, DreamerV3Critic]:
    """Build ``(world_model, actor, critic)`` for a preset name or config.

    ``kernel`` (keyword only) picks the RSSM's posterior scan and imagination implementation:
    ``"auto"`` (default: the fused paths where they apply), ``"eager"`` (always the generic
    step-by-step paths) or ``"fused"`` (see :class:`RSSM`).

    Example:
        >>> wm, actor, critic = make_dreamer("tiny", {"pixels": "packed2"}, action_dim=8)
        >>> wm.latent_dim
        384
        >>> make_dreamer("tiny", {"obs": ("vector", 3)}, 2, kernel="eager")[0].rssm.kernel
        'eager'
    """
    if isinstance(config, str):
        if config not in PRESETS:
            raise KeyError(f"unknown preset {config!r}; choose one of {sorted(PRESETS)}")
        config = PRESETS[config]
    if action_dim < 1:
        raise ValueError(f"action_dim must be >= 1, got {action_dim}")
    wm = WorldModel(obs, action_dim, config, kernel=kernel)
    latent = wm.latent_dim
    hidden = config.hidden if config.ac_hidden is None else config.ac_hidden
    layers = config.mlp_layers if config.ac_layers is None else config.ac_layers
    if hidden < 1 or layers < 1:
        raise ValueError(f"ac_hidden and ac_layers must be >= 1, got {hidden} and {layers}")
    actor = DreamerV3Actor(latent, action_dim, hidden, layers, discrete=discrete,
                           unimix=config.unimix)
    critic = DreamerV3Critic(latent, hidden, layers)
    return wm, actor, critic

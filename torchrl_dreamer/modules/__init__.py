"""torchrl_dreamer.modules: DreamerV3 networks (2023 design, sheeprl 0.8.4 semantics).

- :class:`RSSM` -- LayerNorm-GRU RSSM, learnable tanh initial state, 32x32 latents, unimix.
- Encoders/decoders: :class:`Packed2Encoder`, :class:`ImageEncoder`, :class:`ImageDecoder`,
  :class:`VectorEncoder`, :class:`VectorDecoder`.
- Heads: :class:`TwoHotHead`, :class:`ContinueHead`, :class:`DreamerV3Actor`,
  :class:`DreamerV3Critic`.
- :class:`WorldModel`, :class:`DreamerV3Config`, :data:`PRESETS` (XS..XL, tiny, tiny-wide),
  :data:`CPU_PRESETS`, :func:`make_dreamer`.
- :class:`DreamerPlayer` -- batched acting-time filter + policy for collectors.
"""

from torchrl_dreamer.modules.encoders import (
    ImageDecoder,
    ImageEncoder,
    Packed2Encoder,
    VectorDecoder,
    VectorEncoder,
)
from torchrl_dreamer.modules.functional import (
    lambda_returns,
    symexp,
    symlog,
    symlog_bins,
    two_hot_log_prob,
    two_hot_mean,
    two_hot_weights,
    unimix_logits,
)
from torchrl_dreamer.modules.heads import (
    ContinueHead,
    DreamerV3Actor,
    DreamerV3Critic,
    TwoHotHead,
    one_hot_actions,
)
from torchrl_dreamer.modules.init import hafner_init_, uniform_init_
from torchrl_dreamer.modules.latent import latent_of
from torchrl_dreamer.modules.layers import MLP, LayerNormGRUCell
from torchrl_dreamer.modules.player import DreamerPlayer
from torchrl_dreamer.modules.rssm import RSSM
from torchrl_dreamer.modules.world_model import (
    CPU_PRESETS,
    PRESETS,
    DreamerV3Config,
    WorldModel,
    make_dreamer,
)

__all__ = [
    "RSSM",
    "latent_of",
    "LayerNormGRUCell",
    "MLP",
    "ImageEncoder",
    "ImageDecoder",
    "Packed2Encoder",
    "VectorEncoder",
    "VectorDecoder",
    "TwoHotHead",
    "ContinueHead",
    "DreamerV3Actor",
    "DreamerV3Critic",
    "one_hot_actions",
    "WorldModel",
    "DreamerV3Config",
    "PRESETS",
    "CPU_PRESETS",
    "make_dreamer",
    "DreamerPlayer",
    "hafner_init_",
    "uniform_init_",
    "symlog",
    "symexp",
    "symlog_bins",
    "two_hot_weights",
    "two_hot_log_prob",
    "two_hot_mean",
    "unimix_logits",
    "lambda_returns",
]

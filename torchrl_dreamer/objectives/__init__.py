"""torchrl_dreamer.objectives: DreamerV3 losses as TorchRL ``LossModule`` objects (2023 / sheeprl).

- :class:`DreamerV3WorldModelLoss`, :class:`DreamerV3ActorLoss`, :class:`DreamerV3CriticLoss`
- :class:`DreamerV3Learner` -- runs all three with their optimizers: ``learner.update(batch)``.
- :class:`DreamerV3LossConfig`, :data:`LOSS_PRESETS` (``"sheeprl"``), :class:`SlowCritic`.
- :class:`DreamerV3LearnerConfig`, :data:`LEARNER_PRESETS` -- the optimizers' settings.
- :class:`ContrastiveWorldModelLoss` -- a decoder-free world-model loss (research variant);
  :data:`WORLD_MODEL_LOSSES` names each world-model loss a run can choose.
"""

from torchrl_dreamer.objectives.actor import DreamerV3ActorLoss, make_return_norm
from torchrl_dreamer.objectives.config import LOSS_PRESETS, DreamerV3LossConfig
from torchrl_dreamer.objectives.contrastive import ContrastiveWorldModelLoss, info_nce
from torchrl_dreamer.objectives.critic import DreamerV3CriticLoss, SlowCritic
from torchrl_dreamer.objectives.learner import (
    LEARNER_PRESETS,
    DreamerV3Learner,
    DreamerV3LearnerConfig,
)
from torchrl_dreamer.objectives.representations import (
    REPRESENTATIONS,
    WORLD_MODEL_LOSSES,
    Representation,
    trains_decoder,
)
from torchrl_dreamer.objectives.utils import hold_out_params, total_loss
from torchrl_dreamer.objectives.world_model import (
    DreamerV3WorldModelLoss,
    action_to_vector,
)

__all__ = [
    "DreamerV3WorldModelLoss",
    "ContrastiveWorldModelLoss",
    "info_nce",
    "REPRESENTATIONS",
    "WORLD_MODEL_LOSSES",
    "Representation",
    "trains_decoder",
    "DreamerV3ActorLoss",
    "DreamerV3CriticLoss",
    "DreamerV3Learner",
    "DreamerV3LearnerConfig",
    "LEARNER_PRESETS",
    "DreamerV3LossConfig",
    "LOSS_PRESETS",
    "SlowCritic",
    "make_return_norm",
    "action_to_vector",
    "total_loss",
    "hold_out_params",
]

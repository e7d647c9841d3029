"""Turn a replay sequence into RSSM inputs (the row-alignment contract, in pure torch).

Row t holds o_t, a_t (chosen after seeing o_t), r_t (received on arriving at o_t) and the flags of
o_t (``docs/row_alignment.md``). The RSSM step at t must see the *previous* action a_{t-1}, so the
action column is shifted by one step; it is zero at t=0 (unknown) and wherever ``is_first`` (a new
episode has no previous action; on our deferred-reset envs the action stored on the row before
is_first was ignored by the env). ``is_first[0]`` is forced True so every sequence starts from the
initial state.

:func:`rssm_inputs` is the one place this happens: the world-model loss, the open-loop videos of
training and evaluation and :func:`dreamer_inputs` all call it.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from tensordict import TensorDictBase

from torchrl_dreamer.data.one_hot import one_hot_actions

__all__ = ["action_to_vector", "shift_actions", "rssm_inputs", "dreamer_inputs"]


def action_to_vector(action: torch.Tensor, action_dim: int, batch_dims: int = 2) -> torch.Tensor:
    """Int index ``[T, B]`` / ``[T, B, 1]`` or float ``[T, B, A]`` actions -> float ``[T, B, A]``.

    ``batch_dims`` is the number of leading batch dims (2 for ``[T, B]``).

    Example:
        >>> action_to_vector(torch.tensor([[2], [0]]), 3, batch_dims=1).tolist()
        [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    if not action.dtype.is_floating_point and action.dim() == batch_dims + 1:
        if action.shape[-1] != 1:
            raise ValueError(
                f"integer actions must be indices [T, B] or [T, B, 1], got {tuple(action.shape)}"
            )
        action = action.squeeze(-1)
    return one_hot_actions(action, action_dim)


def shift_actions(
    action: torch.Tensor,
    is_first: torch.Tensor,
    *,
    time_dim: int = 0,
    num_actions: int | None = None,
) -> torch.Tensor:
    """``prev_action[t] = a[t-1]``, zeros at t=0 and where ``is_first[t]``.

    Args:
        action: ``[..., T, ..., *action_shape]`` actions; integer indices need ``num_actions``
            (they are one-hot encoded first: an index cannot be "zeroed").
        is_first: bool, the batch dims of ``action`` (same shape up to the action dims).
        time_dim: the time dim of ``is_first`` (0 for ``[T, B]``, 1 for ``[B, T]``).
        num_actions: one-hot size for integer actions.

    Returns:
        float ``prev_action`` shaped like the (one-hot) action.

    Example:
        >>> a = torch.tensor([[1], [2], [0]])  # [T=3, B=1] action indices
        >>> first = torch.tensor([[False], [True], [False]])
        >>> shift_actions(a, first, num_actions=3)[:, 0].tolist()
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    if not action.is_floating_point():
        if num_actions is None:
            raise ValueError(
                f"action is an integer tensor ({action.dtype}): pass num_actions so it can be "
                "one-hot encoded (an action index cannot be zeroed at episode starts)."
            )
        action = action_to_vector(action, num_actions, batch_dims=is_first.ndim)
    nb = is_first.ndim
    if tuple(action.shape[:nb]) != tuple(is_first.shape):
        raise ValueError(
            f"action shape {tuple(action.shape)} does not start with is_first's batch shape "
            f"{tuple(is_first.shape)}."
        )
    time_dim = time_dim % nb
    prev = torch.roll(action, 1, dims=time_dim)
    prev.narrow(time_dim, 0, 1).zero_()
    mask = is_first.bool().reshape(*is_first.shape, *([1] * (prev.ndim - nb)))
    return prev.masked_fill(mask, 0.0)


def rssm_inputs(
    action: torch.Tensor,
    is_first: torch.Tensor,
    num_actions: int | None = None,
    *,
    time_dim: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(prev_action, is_first)`` the RSSM consumes for replay rows ``[T, B]`` (or ``[B, T]``
    with ``time_dim=1``): ``is_first`` as bool with its first step forced True, and the actions
    (indices ``[T, B]`` / ``[T, B, 1]`` one-hot encoded, or float ``[T, B, A]``) shifted by
    :func:`shift_actions` on that forced ``is_first``.

    Args:
        action: the action column of the rows (``a_t`` on row ``t``).
        is_first: the rows' episode-start flags, ``[T, B]``.
        num_actions: the one-hot size; needed for integer actions, and checked against the
            last dim of float actions when given.
        time_dim: the time dim of ``is_first``.

    Example:
        >>> prev, first = rssm_inputs(torch.tensor([[1], [2]]), torch.zeros(2, 1), 3)
        >>> prev[:, 0].tolist(), first[:, 0].tolist()
        ([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [True, False])
    """
    first = is_first.bool().clone()
    first.narrow(time_dim % first.ndim, 0, 1).fill_(True)
    if num_actions is not None:
        action = action_to_vector(action, num_actions, batch_dims=first.ndim)
    return shift_actions(action, first, time_dim=time_dim), first


def dreamer_inputs(
    sample: TensorDictBase | Mapping[str, torch.Tensor],
    *,
    time_dim: int = 0,
    num_actions: int | None = None,
    action_key: str = "action",
    is_first_key: str = "is_first",
) -> dict[str, torch.Tensor]:
    """RSSM inputs from a sampled sequence ``[T, B]`` (``time_dim=0``) or ``[B, T]`` (``time_dim=1``).

    Returns a new dict (the sample is not modified) with every entry of ``sample`` plus:
    ``is_first`` with ``is_first[0] = True``; ``prev_action`` from :func:`shift_actions` (using
    the forced ``is_first``). Targets stay aligned with row t: reconstruct ``pixels[t]``, predict
    ``reward[t]`` and ``continue_[t]`` from the state at t.
    """
    out = dict(sample.items()) if isinstance(sample, TensorDictBase) else dict(sample)
    out["prev_action"], out[is_first_key] = rssm_inputs(
        out[action_key], out[is_first_key], num_actions, time_dim=time_dim
    )
    return out

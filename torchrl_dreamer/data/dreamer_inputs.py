"""Turn a replay sequence into RSSM inputs (the row-alignment contract, in pure torch).

Row t holds o_t, a_t (chosen after seeing o_t), r_t (received on arriving at o_t) and the flags of
o_t (``docs/row_alignment.md``). The RSSM step at t must see the *previous* action a_{t-1}, so the
action column is shifted by one step; it is zero at t=0 (unknown) and wherever ``is_first`` (a new
episode has no previous action; on our deferred-reset envs the action stored on the row before
is_first was ignored by the env). ``is_first[0]`` is forced True so every sequence starts from the
initial state.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from tensordict import TensorDictBase


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
        action = torch.nn.functional.one_hot(action.long(), num_actions).float()
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
    first = out[is_first_key].bool().clone()
    first.narrow(time_dim % first.ndim, 0, 1).fill_(True)
    out[is_first_key] = first
    out["prev_action"] = shift_actions(
        out[action_key], first, time_dim=time_dim, num_actions=num_actions
    )
    return out

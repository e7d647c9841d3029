"""The run tree: every setting of a training run, defined once, in the section of the part that
reads it.

A run's settings form one nested, frozen tree (:class:`~torchrl_dreamer.trainers.TrainConfig`)
of sections, one per part of the run:

============  =====================  ======================================================
section       class                  read by
============  =====================  ======================================================
``env``       :class:`EnvSection`    the env factory (task, consoles, frames per step)
``replay``    :class:`ReplaySection` the replay ring and its sampler (the ``B x T`` batch)
``model``     :class:`ModelSection`  the networks
``loss``      :class:`LossSection`   the losses (over the loss preset)
``learner``   :class:`LearnerSection` the learner's update (precision, compile, capture)
``collector`` :class:`CollectorSection` the actor/learner loop
``ray``       :class:`RaySection`    the Ray job (``backend="ray"``)
``run``       :class:`RunSection`    the trainer (length, device, seed, logs, checkpoints)
``eval``      :class:`EvalSection`   the final evaluation
============  =====================  ======================================================

Each field is written once, in :mod:`torchrl_dreamer.collectors.sections`, with its type,
default, rule (:mod:`torchrl_dreamer.collectors.setting_rules`) and docstring; this module holds
the tree's table and what is derived from the fields: the command line (``--replay.seq-len``, with the flat ``--seq-len`` as an
alias), the flat configs of the collector and the Ray job
(:class:`~torchrl_dreamer.collectors.AsyncCollectorConfig`,
:class:`~torchrl_dreamer.distributed.RayTrainingConfig`, which take their shared fields from
here through :func:`takes_settings`) and the help text.

**The flat mapping.** Every setting also has a *flat name*, unique across sections: the field's
name, or the ``flat=`` given to :func:`setting` where the section's name would repeat the
section (``replay.capacity`` is ``replay_capacity``). Flat names are what a task's
``train_defaults``, a spec's ``train:`` section, the YAML configs and checkpoints use, and what
``TrainConfig(batch_size=8)`` takes; :func:`flatten_settings` turns any mix of flat names,
dotted paths (``"replay.batch_size"``) and nested sections into flat names, the one place such a
translation happens, and refuses an unknown name with the list of valid ones.

The sections live in the collector layer, the lowest one that both the trainers and
``distributed`` import, and import nothing else of the package, so any part can take its
section. Every name of the two modules beneath is re-exported here.
A setting whose default depends on others (the discount, the loss preset, ...) defaults to
``None`` here and is resolved by :class:`~torchrl_dreamer.trainers.TrainConfig`.

Example:
    >>> ReplaySection().seq_len, ReplaySection().batch_size, ReplaySection().ratio
    (32, 16, 0.05)
    >>> FLAT["replay_capacity"], FLAT["seq_len"]
    (('replay', 'capacity'), ('replay', 'seq_len'))
    >>> flatten_settings({"replay": {"seq_len": 16}, "env.num_envs": 4, "seed": 3})
    {'seq_len': 16, 'num_envs': 4, 'seed': 3}
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin, get_type_hints

from torchrl_dreamer.collectors.sections import (
    BACKENDS,
    EVAL_POLICIES,
    LOGGERS,
    PRECISIONS,
    REPLAY_BACKINGS,
    REPLAY_EVENTS,
    SECTIONS,
    Backend,
    CollectorSection,
    EnvSection,
    EvalPolicy,
    EvalSection,
    LearnerSection,
    LoggerKind,
    LossSection,
    ModelSection,
    Precision,
    RaySection,
    ReplayBacking,
    ReplaySection,
    RunSection,
)
from torchrl_dreamer.collectors.setting_rules import Check, integer, number, optional, setting

__all__ = [
    "BACKENDS",
    "Backend",
    "Check",
    "EVAL_POLICIES",
    "EvalPolicy",
    "LoggerKind",
    "Precision",
    "ReplayBacking",
    "FLAT",
    "LOGGERS",
    "PRECISIONS",
    "REPLAY_BACKINGS",
    "REPLAY_EVENTS",
    "SECTIONS",
    "CollectorSection",
    "EnvSection",
    "EvalSection",
    "LearnerSection",
    "LossSection",
    "ModelSection",
    "RaySection",
    "ReplaySection",
    "RunSection",
    "UnknownSettingError",
    "check_settings",
    "flat_defaults",
    "flatten_settings",
    "identity_settings",
    "integer",
    "number",
    "optional",
    "section_settings",
    "setting",
    "setting_problem",
    "setting_docs",
    "setting_field",
    "takes_settings",
]

class UnknownSettingError(ValueError):
    """A settings mapping names a setting no section has; the message lists the valid names and
    ``unknown`` holds the names refused."""

    def __init__(self, message: str, unknown: list[str] | None = None) -> None:
        super().__init__(message)
        self.unknown = list(unknown or [])


def _flat_name(f: dataclasses.Field) -> str:
    return f.metadata.get("flat", f.name)


def _build_flat() -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            name = _flat_name(f)
            if name in out or name in SECTIONS:
                raise AssertionError(f"flat setting name {name!r} of {section}.{f.name} is not "
                                     f"unique (also {out.get(name)}); give it another flat=.")
            out[name] = (section, f.name)
    return out


FLAT: dict[str, tuple[str, str]] = _build_flat()
"""The one mapping between flat names and the tree: ``{flat name: (section, field)}``. A flat
name is unique across sections (checked when this module is imported)."""

_DOTTED: dict[str, str] = {f"{s}.{f}": flat for flat, (s, f) in FLAT.items()}


def section_settings(section: str) -> tuple[str, ...]:
    """The flat names of every setting of ``section``, in field order: what a flat config that
    is a section's consumer takes whole (``takes_settings(*section_settings("collector"))``), so
    a setting added to the section reaches it with nothing else to change.

    Example:
        >>> section_settings("eval")
        ('eval_episodes', 'eval_time_limit', 'eval_max_steps', 'eval_sampled', 'eval_policy', 'eval_duel_episodes')
    """
    return tuple(_flat_name(f) for f in dataclasses.fields(SECTIONS[section]))


def setting_field(name: str) -> dataclasses.Field:
    """The section field of the setting ``name`` (flat or dotted).

    Example:
        >>> setting_field("replay_ratio").default
        0.05
    """
    flat = _DOTTED.get(name, name)
    section, field = FLAT[flat]
    return next(f for f in dataclasses.fields(SECTIONS[section]) if f.name == field)


def identity_settings() -> tuple[str, ...]:
    """The flat names of the settings that define what a run trains (``setting(...,
    identity=True)``): a checkpoint resumes only under the same values (the others, e.g.
    ``total_steps`` to train longer or the progress bar, may change).

    Example:
        >>> "batch_size" in identity_settings(), "total_steps" in identity_settings()
        (True, False)
    """
    return tuple(n for n in FLAT if setting_field(n).metadata.get("identity"))


def flat_defaults() -> dict[str, Any]:
    """Every setting's field default, by flat name (``None``: resolved per run).

    Example:
        >>> flat_defaults()["seq_len"], flat_defaults()["gamma"]
        (32, None)
    """
    return {flat: setting_field(flat).default for flat in FLAT}


def flatten_settings(settings: Mapping[str, Any], source: str = "settings") -> dict[str, Any]:
    """Flat names of a settings mapping whose keys are flat names (``batch_size``), dotted
    paths (``replay.batch_size``) or sections (``replay: {batch_size: 8}``, or a section
    instance); a later key for the same setting wins.

    Raises:
        UnknownSettingError: a key or a section's key is no setting; the message names
            ``source`` and lists the valid names.

    Example:
        >>> flatten_settings({"replay": ReplaySection(batch_size=8)})["batch_size"]
        8
        >>> flatten_settings({"batchsize": 8}, "my.yaml")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        torchrl_dreamer.collectors.settings.UnknownSettingError: my.yaml sets ['batchsize'], which are not run settings; use flat names from [...'batch_size'...] or dotted ones (replay.batch_size).
    """
    out: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in settings.items():
        if key in SECTIONS:
            if isinstance(value, SECTIONS[key]):
                value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            if not isinstance(value, Mapping):
                raise UnknownSettingError(
                    f"{source}: section {key!r} must be a mapping of its settings (e.g. "
                    f"{key}: {{...}}), got {type(value).__name__}.")
            for field, v in value.items():
                dotted = f"{key}.{field}"
                if dotted in _DOTTED:
                    out[_DOTTED[dotted]] = v
                else:
                    unknown.append(dotted)
        elif key in FLAT:
            out[key] = value
        elif key in _DOTTED:
            out[_DOTTED[key]] = value
        else:
            unknown.append(key)
    if unknown:
        raise UnknownSettingError(
            f"{source} sets {sorted(unknown)}, which are not run settings; use flat names from "
            f"{sorted(FLAT)} or dotted ones (replay.batch_size).", sorted(unknown))
    return out


@functools.cache
def _hint(name: str) -> Any:
    section, field = FLAT[name]
    return get_type_hints(SECTIONS[section])[field]


def setting_problem(name: str, value: Any) -> str | None:
    """Why ``value`` is not valid for the setting ``name`` (flat), or ``None``: its choices
    when its type is a ``Literal``, else its field's ``check``.

    Example:
        >>> setting_problem("num_envs", 0), setting_problem("num_envs", 4)
        ('must be an integer >= 1; pass e.g. num_envs=16.', None)
        >>> setting_problem("logger", "wandb")
        "unknown logger 'wandb'; choose one of csv, tensorboard, both, none."
    """
    hint = _hint(name)
    if get_origin(hint) is not Literal:  # ``Literal[...] | None``: unset, or one of the choices
        options = [a for a in get_args(hint) if a is not type(None)]
        if len(options) == 1 and get_origin(options[0]) is Literal:
            if value is None:
                return None
            hint = options[0]
    if get_origin(hint) is Literal:
        choices = get_args(hint)
        if value not in choices:
            return (f"unknown {name.replace('_', ' ')} {value!r}; choose one of "
                    f"{', '.join(choices)}.")
        return None
    field = setting_field(name)
    check = field.metadata.get("check")
    why = None if check is None else check(value)
    if why is not None and field.default is not None:
        why = f"{why[:-1]}; pass e.g. {name}={field.default!r}."
    return why


def check_settings(owner: str, obj: Any, names: Any = None,
                   error: type[ValueError] = ValueError) -> None:
    """Apply each setting's one rule (:func:`setting_problem`) to ``obj``'s values of the
    settings ``names`` (flat; default ``obj.run_settings``): the check every config that holds
    run settings makes, so a value is judged by the same rule whichever config it was given
    to. Raises ``error("<owner>.<name>=<value> is invalid: <why>")`` for the first bad one.

    Example:
        >>> import types
        >>> check_settings("Mine", types.SimpleNamespace(num_envs=0), ["num_envs"])
        Traceback (most recent call last):
        ...
        ValueError: Mine.num_envs=0 is invalid: must be an integer >= 1; pass e.g. num_envs=16.
    """
    for name in (obj.run_settings if names is None else names):
        value = getattr(obj, name)
        why = setting_problem(name, value)
        if why is not None:
            raise error(f"{owner}.{name}={value!r} is invalid: {why}")


def _field_docs(cls: type) -> dict[str, str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body
    docs = {}
    for node, nxt in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)):
            docs[node.target.id] = " ".join(inspect.cleandoc(nxt.value.value).split())
    return docs


@functools.cache
def setting_docs() -> dict[str, str]:
    """The docstring under each section field, by flat name (the generated flags' help).

    Example:
        >>> setting_docs()["num_envs"]
        'Consoles (envs) stepped together.'
    """
    out = {}
    for flat, (section, field) in FLAT.items():
        out[flat] = _field_docs(SECTIONS[section])[field]
    return out


def takes_settings(*names: str) -> Any:
    """Class decorator (put it *below* ``@dataclasses.dataclass``): give a flat config the run
    settings ``names`` as fields of the same flat name, type and default as their section's,
    ahead of its own fields, so a config that shares a setting never restates it. The names are
    recorded as ``cls.run_settings``.

    Example:
        >>> @dataclasses.dataclass
        ... @takes_settings("seq_len", "seed")
        ... class Mine:
        ...     margin: int = 4
        >>> Mine(), Mine.run_settings
        (Mine(seq_len=32, seed=0, margin=4), ('seq_len', 'seed'))
    """
    for name in names:
        if name not in FLAT:
            raise UnknownSettingError(f"takes_settings: {name!r} is not a run setting; use "
                                      f"names from {sorted(FLAT)}.")

    def wrap(cls: type) -> type:
        own = dict(cls.__dict__.get("__annotations__", {}))
        clash = sorted(set(own) & set(names))
        if clash:
            raise TypeError(f"{cls.__name__} restates the run settings {clash}; drop its own "
                            "fields: takes_settings gives them with their one default.")
        annotations: dict[str, Any] = {}
        for name in names:
            f = setting_field(name)
            annotations[name] = f.type
            setattr(cls, name, f.default)
        cls.__annotations__ = {**annotations, **own}
        cls.run_settings = tuple(names)
        return cls

    return wrap

"""Which console runs a cartridge: the original Game Boy (``"dmg"``) or the Game Boy Color
(``"cgb"``), and in which of the Color's modes.

- ``model=None`` (the default) picks the Color for a Color-only cartridge (header byte 0x143 =
  0xC0) and the DMG for every other one (a dual-mode 0x80 cartridge runs its DMG code paths).
- ``model="cgb"`` runs a Color (0x80 or 0xC0) cartridge in Color mode, and a DMG-only cartridge
  in the Color's compatibility mode, as the real console does: the Color's post-boot registers
  and DIV phase and its hardware differences (no OAM bug), with the DMG's registers and
  picture (the Color-only registers read FF), coloured through the palettes the Color's boot
  ROM picks by the header (:mod:`~.compat_palettes`, :mod:`~.render_compat`); packed2 stays
  the DMG's shades.
- ``model="dmg"`` refuses a Color-only cartridge (:class:`~.cartridge.ColorOnlyCartridgeError`).

Example:
    >>> resolve_model(None, 0xC0), resolve_model("cgb", 0x00), resolve_model(None, 0x80)
    (('cgb', 1), ('cgb', 2), ('dmg', 0))
"""

from __future__ import annotations

from torchrl_dreamer.emulator.cartridge import CGB_ONLY, ColorOnlyCartridgeError
from torchrl_dreamer.emulator.layout import MODEL_CGB, MODEL_CGB_COMPAT, MODEL_DMG

__all__ = ["MODELS", "resolve_model"]

MODELS = ("dmg", "cgb")
"""Console models a :class:`~.gameboy.GameBoy` can be."""


def resolve_model(model: str | None, cgb_flag: int) -> tuple[str, int]:
    """``(model name, CGB state column value)`` for ``model`` and a cartridge's byte 0x143.

    Raises:
        ValueError: an unknown model (the message lists :data:`MODELS`).
        ColorOnlyCartridgeError: ``model="dmg"`` for a Color-only cartridge.
    """
    if model is None:
        model = "cgb" if cgb_flag == CGB_ONLY else "dmg"
    if model not in MODELS:
        raise ValueError(f"unknown Game Boy model {model!r}; expected one of: {', '.join(MODELS)} "
                         "(or None: the Color for a Color-only cartridge, else the DMG)")
    if model == "dmg":
        if cgb_flag == CGB_ONLY:
            raise ColorOnlyCartridgeError(
                "this ROM is a Game Boy Color-only game (header byte 0x143 is 0xC0) and model='dmg' "
                "was asked for: a DMG (original Game Boy) cannot run it. Use model='cgb' (--model "
                "cgb) or leave model unset")
        return model, MODEL_DMG
    if cgb_flag & 0x80:
        return model, MODEL_CGB
    return model, MODEL_CGB_COMPAT

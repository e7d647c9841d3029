; ---------------------------------------------------------------------------------------------
; The shared games' score, as macros (included before use; they emit code where they stand).
; score_plus_one: SCORE + 1 (16-bit binary, little-endian) and
; SCORE_BCD + 1 (4 BCD digits, little-endian, what the HUD draws). The game defines both in
; RAM. Clobbers a and hl.
; ---------------------------------------------------------------------------------------------

macro score_plus_one
    ld hl, SCORE
    inc [hl]
    jr nz, .bcd\@
    inc hl
    inc [hl]
.bcd\@:
    ld a, [SCORE_BCD]
    add a, 1
    daa
    ld [SCORE_BCD], a
    ld a, [SCORE_BCD + 1]
    adc a, 0
    daa
    ld [SCORE_BCD + 1], a
endm

; digit_cells: the low nibble of a drawn as its two score-font tiles (digits.asm, from tile
; TILE_DIGITS, which the game defines) at hl (top) and hl + 32 (bottom); hl + 1 after.
; Clobbers a and de.
macro digit_cells
    and $0F
    add a, a
    add a, TILE_DIGITS
    ld [hl], a
    inc a
    ld de, 32
    push hl
    add hl, de
    ld [hl], a
    pop hl
    inc hl
endm

; ---------------------------------------------------------------------------------------------
; score_plus_one: the shared games' score, SCORE + 1 (16-bit binary, little-endian) and
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

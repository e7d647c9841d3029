; ---------------------------------------------------------------------------------------------
; rng_byte: the shared games' random numbers. Include it where the routine belongs; the game
; defines RNG, the LFSR's 16-bit state in RAM (little-endian), and seeds it.
; ---------------------------------------------------------------------------------------------

; Advance the 16-bit Galois LFSR (taps $B400) by 8 steps; a = new low byte.
rng_byte:
    ld a, [RNG]
    ld l, a
    ld a, [RNG + 1]
    ld h, a
    ld b, 8
.step:
    srl h
    rr l
    jr nc, .no_tap
    ld a, h
    xor $B4
    ld h, a
.no_tap:
    dec b
    jr nz, .step
    ld a, l
    ld [RNG], a
    ld a, h
    ld [RNG + 1], a
    ld a, l
    ret

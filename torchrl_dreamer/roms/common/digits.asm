; ---------------------------------------------------------------------------------------------
; digit_tiles: the shared games' score font, ten 3x5-block digits of two tiles each (20 tiles,
; 320 bytes), a digit d at tiles 2d (top) and 2d + 1 (bottom) from where it is included.
; ---------------------------------------------------------------------------------------------

; One 2-pixel-high row of 3 blocks of a digit: \1 is a 3-bit pattern, bit 2 = left block.
macro digit_row
    db ((\1 >> 2) & 1) * $C0 | ((\1 >> 1) & 1) * $30 | (\1 & 1) * $0C
    db ((\1 >> 2) & 1) * $C0 | ((\1 >> 1) & 1) * $30 | (\1 & 1) * $0C
    db ((\1 >> 2) & 1) * $C0 | ((\1 >> 1) & 1) * $30 | (\1 & 1) * $0C
    db ((\1 >> 2) & 1) * $C0 | ((\1 >> 1) & 1) * $30 | (\1 & 1) * $0C
endm

; A 3x5-block digit as two tiles: top tile rows 2-7 hold block rows 1-3, bottom rows 0-3 rows 4-5.
macro digit
    ds 4, 0
    digit_row \1
    digit_row \2
    digit_row \3
    digit_row \4
    digit_row \5
    ds 8, 0
endm

digit_tiles:
    digit %111, %101, %101, %101, %111  ; 0
    digit %010, %110, %010, %010, %111  ; 1
    digit %111, %001, %111, %100, %111  ; 2
    digit %111, %001, %111, %001, %111  ; 3
    digit %101, %101, %111, %001, %001  ; 4
    digit %111, %100, %111, %001, %111  ; 5
    digit %111, %100, %111, %101, %111  ; 6
    digit %111, %001, %001, %001, %001  ; 7
    digit %111, %101, %111, %101, %111  ; 8
    digit %111, %101, %111, %001, %111  ; 9
digit_tiles_end:

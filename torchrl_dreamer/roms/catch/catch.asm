; ---------------------------------------------------------------------------------------------
; CATCH: move a paddle to catch falling blocks. DMG, ROM only (32 KiB), 60 fps.
; Source of catch.gb; rebuild with `python -m torchrl_dreamer.roms.build` (check with --check).
;
; Screen: the top 16 pixels show the score (4 decimal digits, 6x10-pixel digits made of 2x2
; blocks) at x = 8..39 and the lives left as up to 3 black 6x10 bars at x = 128..157; a 2-pixel
; black line at y = 16 separates the playfield (y = 24..143). One 8x8 black block falls at a time
; in one of 10 columns (16 pixels wide, block at x = 16 * column + 4) from y = 24, 2 pixels every
; FALL_PERIOD frames (5, then 4 from a score of 10). The paddle is a 24x8 black bar at
; y = 128..135. Shades are 0 (white) and 3 (black) only; every coordinate is even.
;
; Controls: LEFT / RIGHT hold to move the paddle 2 pixels per frame (16 pixels per env step with
; an 8-frame press); x is clamped to 0..136. START in the waiting / over state starts a new game
; with SEED + 1 (human play).
;
; Rules: when the block's bottom reaches the paddle's top (block y = 120) it is caught if it
; overlaps the paddle horizontally (score + 1) and missed otherwise (lives - 1); then the next
; block appears at the top, in a column drawn from a 16-bit LFSR seeded from SEED (rejection
; sampling of 4-bit values < 10). With no lives left GAME_STATE becomes 2.
;
; RAM interface (WRAM):
;   $C000 GAME_STATE  0 = waiting, 1 = playing, 2 = game over (no lives left)
;   $C001 NEW_GAME    write non-zero: a new game starts at the next frame (then cleared)
;   $C002 SEED        RNG seed read at the new game
;   $C003 LIVES       lives left (3 at the start)
;   $C004 SCORE       blocks caught, 16-bit little-endian ($C004 low, $C005 high)
;   $C006 MISSES      blocks missed this game
;   $C007 PADDLE_X    paddle left x in pixels (0..136, even)
;   $C008 OBJ_X       falling block left x in pixels
;   $C009 OBJ_Y       falling block top y in pixels (24..120)
;   $C00A OBJ_COL     falling block column 0..9
;   $C00B FALL_TIMER  frames until the block moves (internal)
;   $C00C FALL_PERIOD frames per 2-pixel fall step
;   $C00D RNG         LFSR state, 16-bit little-endian (internal)
;   $C00F SCORE_BCD   score as 4 BCD digits, little-endian (displayed)
;   $C0F0 FRAME, $C0F1 JOY, $C0F2 JOY_PREV (see ../common/gb.asm)
;
; Task reward (torchrl_dreamer.envs catch task): +1 per point of SCORE gained in the step,
; -1 per life lost; the episode terminates when GAME_STATE becomes 2.
; ---------------------------------------------------------------------------------------------

include "../common/gb.asm"
include "../common/score.asm"

START_LIVES   equ 3
NUM_COLUMNS   equ 10
PADDLE_Y      equ 128
PADDLE_W      equ 24
PADDLE_MAX_X  equ 160 - PADDLE_W
PADDLE_START  equ (160 - PADDLE_W) / 2
PADDLE_SPEED  equ 2
OBJ_START_Y   equ 24
CATCH_Y       equ PADDLE_Y - 8
SLOW_PERIOD   equ 5
FAST_PERIOD   equ 4
FAST_SCORE    equ 10

TILE_BLANK    equ 0
TILE_SOLID    equ 1
TILE_LINE     equ 2
TILE_LIFE     equ 3                 ; 3 = top half, 4 = bottom half
TILE_DIGITS   equ 16                ; digit d: top half 16 + 2d, bottom half 17 + 2d

SCORE_MAP     equ BG_MAP + 1        ; tile column 1, rows 0-1
LIVES_MAP     equ BG_MAP + 16       ; tile columns 16-18, rows 0-1
LINE_MAP      equ BG_MAP + 2 * 32   ; tile row 2

section "catch variables", $C003
LIVES:       ds 1
SCORE:       ds 2
MISSES:      ds 1
PADDLE_X:    ds 1
OBJ_X:       ds 1
OBJ_Y:       ds 1
OBJ_COL:     ds 1
FALL_TIMER:  ds 1
FALL_PERIOD: ds 1
RNG:         ds 2
SCORE_BCD:   ds 2

section "catch code", common_code_end
game_init:
    ld hl, tiles
    ld de, $8000
    ld bc, tiles_end - tiles
    call memcpy
    ld hl, digit_tiles
    ld de, $8000 + TILE_DIGITS * 16
    ld bc, digit_tiles_end - digit_tiles
    call memcpy
    ld hl, LINE_MAP
    ld bc, 20
    ld a, TILE_LINE
    call memset
    jp lcd_on_and_run

main_loop:
    call wait_frame
    call update_oam                 ; VRAM/OAM work first, while in VBlank
    call draw_hud
    call read_joy
    ld a, [NEW_GAME]
    and a
    jr z, .no_request
    call new_game
    jr main_loop
.no_request:
    ld a, [GAME_STATE]
    cp STATE_PLAYING
    jr z, .playing
    call joy_pressed                ; waiting / over: START plays again
    and JOY_START
    jr z, main_loop
    ld hl, SEED
    inc [hl]
    ld a, 1
    ld [NEW_GAME], a
    jr main_loop
.playing:
    call update_paddle
    call update_block
    jr main_loop

new_game:
    ld a, [SEED]
    ld [RNG + 1], a
    xor $A5                         ; never both bytes zero: the LFSR must not be all-zero
    ld [RNG], a
    xor a
    ld [SCORE], a
    ld [SCORE + 1], a
    ld [SCORE_BCD], a
    ld [SCORE_BCD + 1], a
    ld [MISSES], a
    ld [NEW_GAME], a
    ld a, START_LIVES
    ld [LIVES], a
    ld a, PADDLE_START
    ld [PADDLE_X], a
    ld a, SLOW_PERIOD
    ld [FALL_PERIOD], a
    call spawn_block
    ld a, STATE_PLAYING
    ld [GAME_STATE], a
    ret

; LEFT / RIGHT move the paddle PADDLE_SPEED pixels this frame (LEFT wins if both are held).
update_paddle:
    ld a, [JOY]
    bit 5, a
    jr z, .not_left
    ld a, [PADDLE_X]
    sub PADDLE_SPEED
    jr nc, .store
    xor a
    jr .store
.not_left:
    bit 4, a
    ret z
    ld a, [PADDLE_X]
    add a, PADDLE_SPEED
    cp PADDLE_MAX_X + 1
    jr c, .store
    ld a, PADDLE_MAX_X
.store:
    ld [PADDLE_X], a
    ret

; Let the block fall; at the paddle's row it is caught or missed.
update_block:
    ld hl, FALL_TIMER
    dec [hl]
    ret nz
    ld a, [FALL_PERIOD]
    ld [hl], a
    ld a, [OBJ_Y]
    add a, 2
    ld [OBJ_Y], a
    cp CATCH_Y
    ret nz
    ld a, [PADDLE_X]
    ld b, a
    ld a, [OBJ_X]
    add a, 8                        ; block right end must be > paddle left
    cp b
    jr c, .miss
    jr z, .miss
    ld a, b
    add a, PADDLE_W
    ld b, a
    ld a, [OBJ_X]                   ; block left must be < paddle right end
    cp b
    jr nc, .miss
    score_plus_one                  ; caught
    ld a, [SCORE + 1]
    and a
    jr nz, .fast
    ld a, [SCORE]
    cp FAST_SCORE
    jr c, spawn_block
.fast:
    ld a, FAST_PERIOD
    ld [FALL_PERIOD], a
    jr spawn_block
.miss:
    ld hl, MISSES
    inc [hl]
    jr nz, .lose_life
    dec [hl]
.lose_life:
    ld hl, LIVES
    dec [hl]
    jr nz, spawn_block
    ld a, STATE_OVER
    ld [GAME_STATE], a
    ret

; New block at the top of a random column.
spawn_block:
    call rng_byte
    and $0F
    cp NUM_COLUMNS
    jr nc, spawn_block
    ld [OBJ_COL], a
    swap a
    add a, 4
    ld [OBJ_X], a
    ld a, OBJ_START_Y
    ld [OBJ_Y], a
    ld a, [FALL_PERIOD]
    ld [FALL_TIMER], a
    ret

include "../common/rng.asm"

; Sprites: 0-2 paddle, 3 block. Hidden while waiting; the block is hidden after game over.
update_oam:
    ld hl, OAM
    ld a, [GAME_STATE]
    and a
    jr z, .hide_all
    ld a, [PADDLE_X]
    add a, 8
    ld c, a
    ld b, 3
.paddle:
    ld a, PADDLE_Y + 16
    ld [hl+], a
    ld a, c
    ld [hl+], a
    add a, 8
    ld c, a
    ld a, TILE_SOLID
    ld [hl+], a
    xor a
    ld [hl+], a
    dec b
    jr nz, .paddle
    ld a, [GAME_STATE]
    cp STATE_PLAYING
    jr nz, .hide_block
    ld a, [OBJ_Y]
    add a, 16
    ld [hl+], a
    ld a, [OBJ_X]
    add a, 8
    ld [hl+], a
    ld a, TILE_SOLID
    ld [hl+], a
    xor a
    ld [hl], a
    ret
.hide_all:
    xor a
    ld [hl], a
    ld l, 4
    ld [hl], a
    ld l, 8
    ld [hl], a
.hide_block:
    xor a
    ld l, 12
    ld [hl], a
    ret

; Score digits and life bars into the BG map (called in VBlank, ~400 cycles).
draw_hud:
    ld hl, SCORE_MAP
    ld a, [SCORE_BCD + 1]
    swap a
    call .digit
    ld a, [SCORE_BCD + 1]
    call .digit
    ld a, [SCORE_BCD]
    swap a
    call .digit
    ld a, [SCORE_BCD]
    call .digit
    ld hl, LIVES_MAP
    ld a, [LIVES]
    ld b, a
    ld c, 3
.life:
    ld a, b
    and a
    jr z, .no_life
    dec b
    ld a, TILE_LIFE
.no_life:                           ; a = TILE_BLANK (0) or TILE_LIFE
    ld [hl], a
    and a
    jr z, .bottom
    inc a
.bottom:
    ld de, 32
    add hl, de
    ld [hl], a
    ld de, -31
    add hl, de
    dec c
    jr nz, .life
    ret
.digit:                             ; low nibble of a at hl (top) / hl + 32 (bottom); hl + 1
    digit_cells
    ret

; ---------------------------------------------------------------------------------------------
; Graphics: 2 bytes per pixel row (low plane, high plane); shade 3 = both bits set.
tiles:
    ds 16, $00                      ; 0: blank
    ds 16, $FF                      ; 1: solid (paddle, block)
    db $FF, $FF, $FF, $FF           ; 2: HUD line, 2 pixel rows at the top
    ds 12, $00
    ds 4, $00                       ; 3: life bar top (rows 2-7, x 0-5)
    ds 12, $FC
    ds 8, $FC                       ; 4: life bar bottom (rows 0-3)
    ds 8, $00
tiles_end:

include "../common/digits.asm"

assert digit_tiles_end - digit_tiles == 10 * 32, "each digit is two tiles"
assert @ < $8000, "catch ROM overflows 32 KiB"

; ---------------------------------------------------------------------------------------------
; RUNNER: jump over the blocks that scroll towards you. DMG, ROM only (32 KiB), 60 fps.
; Source of runner.gb; rebuild with `python -m torchrl_dreamer.roms.build` (check with --check).
;
; Screen: a side view. The ground line (2 black pixel rows) is at y = 112 with pebbles below it
; that scroll with the background (SCX); the score (4 decimal digits, 6x10-pixel digits made of
; 2x2 blocks, as in catch) sits in the window at the bottom, x = 64..95, y = 130..139. The runner
; is an 8x16 sprite (a black block with a white eye, two legs) at x = 24..31, standing on the
; ground (y = 96..111) or jumping. Obstacles are black blocks standing on the ground, 8 or 16
; pixels wide and 8 or 16 high (1-2 tiles each way, drawn as sprites), that enter at the right
; edge and move left with the ground. The title screen shows RUNNER in block letters (4x4-pixel
; cells) at y = 24..43 above the standing runner; it is cleared when a game starts. Shades are 0
; (white) and 3 (black) only; every coordinate is even.
;
; Controls: A (held or pressed) jumps when the runner is on the ground; there is no jump in the
; air; A held through a landing jumps again at the next frame. The jump is a fixed parabola:
; JUMP_FRAMES - 1 = 51 frames in the air, feet up to JUMP_PEAK = 48 pixels above the ground
; (table `jump_arc`).
; START on the title screen (GAME_STATE 0) or after a game over (2) starts a game; nothing else
; does anything.
;
; Rules: the ground and the obstacles move 2 pixels left on each frame where the 8-bit
; accumulator SUBSTEP += SPEED carries, so SPEED / 128 pixels per frame on average: 1.25 at the
; start (SPEED 160), + SPEED_INC = 3 per obstacle passed up to 255 (about 2 pixels per frame,
; from a score of 32). Obstacles appear at x = 160; the ground scrolled from one obstacle's
; appearance to the next one's is (GAP_MIN + r) * 2 pixels with r uniform in 0..GAP_MASK
; (120..246 pixels: at least 60 frames, more than a jump, at the top speed), the first one
; FIRST_GAP * 2 = 128 pixels in. Sizes (w x h): 8x8 five times in eight, 8x16, 16x8 and 16x16
; once each. Random numbers come from a 16-bit Galois LFSR (taps $B400, 8 steps a byte), warmed
; up by 2 bytes at the start of a game. An obstacle whose right edge reaches the runner's left
; edge (x + w <= 24) is passed: SCORE + 1 and SPEED + 3. The runner touching an obstacle (their
; boxes overlap: the obstacle covers part of x = 24..31 and the runner's feet are lower than its
; top) ends the game: GAME_STATE = 2, and the screen freezes until the next game.
;
; Seeding, two ways:
;   - START (human play, and the task spec's start macro): the LFSR state is the 16-bit frame
;     counter CLOCK of the frame START was seen on (a zero state is replaced by $ACE1), so the
;     frame START is pressed on decides the game, as in most cartridges.
;   - NEW_GAME (the shared interface of our games): write SEED, then NEW_GAME = 1; the game
;     starts at the next frame with state SEED << 8 | (SEED xor $A5).
;
; RAM interface (WRAM):
;   $C000 GAME_STATE  0 = title (waiting for START), 1 = playing, 2 = game over (hit an obstacle)
;   $C001 NEW_GAME    write non-zero: a new game starts at the next frame (then cleared)
;   $C002 SEED        RNG seed read at a NEW_GAME request
;   $C003 SCORE       obstacles passed, 16-bit little-endian ($C003 low, $C004 high)
;   $C005 SCORE_BCD   score as 4 BCD digits, little-endian (displayed)
;   $C007 RUNNER_H    height of the runner's feet above the ground in pixels (0..48, even)
;   $C008 JUMP_T      frames since take-off, 0 on the ground (1..51 in the air)
;   $C009 SPEED       2-pixel steps per frame x 256 (160 at the start, 255 at most)
;   $C00A SUBSTEP     speed accumulator (internal)
;   $C00B SPAWN_DIST  2-pixel steps until the next obstacle appears
;   $C00C SCROLL      SCX of the ground (+2 per step)
;   $C00D RNG         LFSR state, 16-bit little-endian (internal)
;   $C00F CLOCK       frame counter, 16-bit little-endian, the START seed
;   $C011 TITLE_ON    1 while the title letters are on screen (internal)
;   $C020 OBSTACLES   4 slots of 4 bytes: X (left edge x + 16; 176 on entry, freed at 0), W, H
;                     (8 or 16), STATE (0 free, 1 ahead of the runner, 2 passed)
;   $C100 SHADOW_OAM  160-byte copy of OAM sent by OAM DMA every VBlank (sprites 0-1 the runner,
;                     2 + 4 * slot .. 5 + 4 * slot the obstacle of that slot)
;   $C0F0 FRAME, $C0F1 JOY, $C0F2 JOY_PREV (see ../common/gb.asm)
;
; Task reward (examples/tasks/runner.yaml): +1 per point of SCORE gained in the step; the episode
; terminates when GAME_STATE becomes 2.
; ---------------------------------------------------------------------------------------------

include "../common/gb.asm"
include "../common/score.asm"

rDMA          equ $FF46
LCDC_RUNNER   equ LCDC_ON | %01100000   ; LCDC_ON plus the window, its map at $9C00
WIN_MAP       equ $9C00
HRAM_DMA      equ $FF80                 ; the OAM DMA routine runs from HRAM

GROUND_Y      equ 112                   ; top row of the ground line
RUNNER_X      equ 24                    ; runner's left edge (screen x)
RUNNER_TOP    equ GROUND_Y - 16         ; runner's top y when standing
X_OFFSET      equ 16                    ; obstacle X in RAM = screen x + 16
RUNNER_SX     equ RUNNER_X + X_OFFSET
SPAWN_X       equ 160 + X_OFFSET
NUM_SLOTS     equ 4
SLOT_SIZE     equ 4
OBS_FREE      equ 0
OBS_AHEAD     equ 1
OBS_PASSED    equ 2

JUMP_FRAMES   equ 52                    ; JUMP_T runs 1..JUMP_FRAMES - 1, then lands
JUMP_PEAK     equ 48
SPEED_START   equ 160
SPEED_INC     equ 3
SPEED_MAX     equ 255
GAP_MIN       equ 60                    ; 2-pixel steps between obstacle appearances, plus
GAP_MASK      equ 63                    ; a random 0..GAP_MASK
FIRST_GAP     equ 64                    ; steps before the first one
ZERO_SEED     equ $ACE1                 ; replaces an all-zero LFSR state

TILE_BLANK    equ 0
TILE_SOLID    equ 1                     ; obstacles
TILE_HEAD     equ 2                     ; runner top (eye)
TILE_LEGS     equ 3                     ; runner bottom
TILE_GROUND   equ 4                     ; 4-6: ground line variants, 7-8: pebbles below
TILE_QUAD     equ 16                    ; 16-31: 4x4-pixel quadrants, bit 3 top-left, 2 top-right,
                                        ; 1 bottom-left, 0 bottom-right
TILE_DIGITS   equ 32                    ; digit d: top half 32 + 2d, bottom half 33 + 2d

GROUND_MAP    equ BG_MAP + (GROUND_Y / 8) * 32
TITLE_ROW     equ 3
TITLE_COL     equ 2
TITLE_W       equ 16
TITLE_H       equ 3
TITLE_MAP     equ BG_MAP + TITLE_ROW * 32 + TITLE_COL
SCORE_MAP     equ WIN_MAP + 8           ; window tile columns 8-11, rows 0-1
WIN_Y         equ 128

section "runner variables", $C003
SCORE:       ds 2
SCORE_BCD:   ds 2
RUNNER_H:    ds 1
JUMP_T:      ds 1
SPEED:       ds 1
SUBSTEP:     ds 1
SPAWN_DIST:  ds 1
SCROLL:      ds 1
RNG:         ds 2
CLOCK:       ds 2
TITLE_ON:    ds 1

section "runner obstacles", $C020
OBSTACLES:   ds NUM_SLOTS * SLOT_SIZE

section "runner shadow oam", $C100
SHADOW_OAM:  ds 160

section "runner code", common_code_end
game_init:
    ld hl, tiles
    ld de, $8000
    ld bc, tiles_end - tiles
    call memcpy
    ld hl, quad_tiles
    ld de, $8000 + TILE_QUAD * 16
    ld bc, quad_tiles_end - quad_tiles
    call memcpy
    ld hl, digit_tiles
    ld de, $8000 + TILE_DIGITS * 16
    ld bc, digit_tiles_end - digit_tiles
    call memcpy
    ld hl, ground_map
    ld de, GROUND_MAP
    ld bc, ground_map_end - ground_map
    call memcpy
    ld hl, title_map
    ld de, TITLE_MAP
    ld b, TITLE_H
.title_row:
    push bc
    ld bc, TITLE_W
    call memcpy
    ld a, e                         ; next map row: de + 32 - TITLE_W
    add a, 32 - TITLE_W
    ld e, a
    jr nc, .no_carry
    inc d
.no_carry:
    pop bc
    dec b
    jr nz, .title_row
    ld hl, dma_routine
    ld de, HRAM_DMA
    ld bc, dma_routine_end - dma_routine
    call memcpy
    ld a, 1
    ld [TITLE_ON], a
    call build_oam
    ld a, WIN_Y
    ldh [rWY], a
    ld a, 7
    ldh [rWX], a
    ld a, IE_VBLANK                 ; as lcd_on_and_run, with the window on
    ldh [rIE], a
    xor a
    ldh [rIF], a
    ld a, LCDC_RUNNER
    ldh [rLCDC], a
    ei
    jp main_loop

main_loop:
    call wait_frame
    ld a, high(SHADOW_OAM)          ; VRAM/OAM work first, while in VBlank
    call HRAM_DMA
    ld a, [SCROLL]
    ldh [rSCX], a
    call draw_hud
    ld a, [TITLE_ON]
    and a
    jr z, .title_done
    ld a, [GAME_STATE]
    and a
    call nz, clear_title
.title_done:
    ld hl, CLOCK
    inc [hl]
    jr nz, .clock_done
    inc hl
    inc [hl]
.clock_done:
    call read_joy
    ld a, [NEW_GAME]
    and a
    jr z, .no_request
    ld a, [SEED]
    ld h, a
    xor $A5                         ; never both bytes zero
    ld l, a
    call new_game
    jr .end
.no_request:
    ld a, [GAME_STATE]
    cp STATE_PLAYING
    jr z, .playing
    call joy_pressed                ; title / game over: START plays
    and JOY_START
    jr z, .end
    ld a, [CLOCK]
    ld l, a
    ld a, [CLOCK + 1]
    ld h, a
    call new_game
    jr .end
.playing:
    call update_runner
    call update_obstacles
.end:
    call build_oam
    jr main_loop

; Start a game with LFSR state hl.
new_game:
    ld a, h
    or l
    jr nz, .seed_ok
    ld hl, ZERO_SEED
.seed_ok:
    ld a, l
    ld [RNG], a
    ld a, h
    ld [RNG + 1], a
    call rng_byte                   ; warm-up: close seeds give unrelated games
    call rng_byte
    xor a
    ld [NEW_GAME], a
    ld [SCORE], a
    ld [SCORE + 1], a
    ld [SCORE_BCD], a
    ld [SCORE_BCD + 1], a
    ld [RUNNER_H], a
    ld [JUMP_T], a
    ld [SUBSTEP], a
    ld [SCROLL], a
    ld hl, OBSTACLES
    ld b, NUM_SLOTS * SLOT_SIZE
.clear:
    ld [hl+], a
    dec b
    jr nz, .clear
    ld a, SPEED_START
    ld [SPEED], a
    ld a, FIRST_GAP
    ld [SPAWN_DIST], a
    ld a, STATE_PLAYING
    ld [GAME_STATE], a
    ret

; On the ground, A takes off; in the air, follow the arc one frame.
update_runner:
    ld a, [JUMP_T]
    and a
    jr nz, .in_air
    ld a, [JOY]
    and JOY_A
    ret z
    xor a
.in_air:
    inc a
    cp JUMP_FRAMES
    jr c, .store
    xor a                           ; landed
.store:
    ld [JUMP_T], a
    ld e, a
    ld d, 0
    ld hl, jump_arc
    add hl, de
    ld a, [hl]
    ld [RUNNER_H], a
    ret

; Scroll when the accumulator carries, spawn, then score passes and detect a hit.
update_obstacles:
    ld a, [SPEED]
    ld b, a
    ld a, [SUBSTEP]
    add a, b
    ld [SUBSTEP], a
    jr nc, check_obstacles
    ld hl, SCROLL
    inc [hl]
    inc [hl]
    ld hl, OBSTACLES
    ld b, NUM_SLOTS
.move:
    inc hl                          ; hl -> STATE
    inc hl
    inc hl
    ld a, [hl]
    dec hl
    dec hl
    dec hl
    and a
    jr z, .move_next
    ld a, [hl]
    sub 2
    ld [hl], a
    jr nz, .move_next
    inc hl                          ; off the left edge: free the slot
    inc hl
    inc hl
    ld [hl], OBS_FREE
    dec hl
    dec hl
    dec hl
.move_next:
    ld a, l
    add a, SLOT_SIZE
    ld l, a
    dec b
    jr nz, .move
    ld hl, SPAWN_DIST
    dec [hl]
    call z, spawn_obstacle
check_obstacles:
    ld hl, OBSTACLES
    ld b, NUM_SLOTS
.slot:
    ld a, [hl+]
    ld c, a                         ; c = X
    ld a, [hl+]
    ld d, a                         ; d = W
    ld a, [hl+]
    ld e, a                         ; e = H
    ld a, [hl]
    cp OBS_AHEAD
    jr nz, .next
    ld a, c
    add a, d
    cp RUNNER_SX + 1
    jr c, .passed                   ; right edge at or left of the runner's left edge
    ld a, c
    cp RUNNER_SX + 8
    jr nc, .next                    ; left edge right of the runner
    ld a, [RUNNER_H]
    cp e
    jr nc, .next                    ; feet at or above the obstacle's top
    ld a, STATE_OVER
    ld [GAME_STATE], a
    ret
.passed:
    ld [hl], OBS_PASSED
    push hl
    push bc
    call add_point
    pop bc
    pop hl
.next:
    inc hl
    dec b
    jr nz, .slot
    ret

; A new obstacle at the right edge in a free slot (none free: try again at the next step);
; then draw the distance to the next one.
spawn_obstacle:
    ld hl, OBSTACLES + 3
    ld b, NUM_SLOTS
.find:
    ld a, [hl]
    and a
    jr z, .found
    ld a, l
    add a, SLOT_SIZE
    ld l, a
    dec b
    jr nz, .find
    ld a, 1
    ld [SPAWN_DIST], a
    ret
.found:
    ld [hl], OBS_AHEAD
    dec hl
    dec hl
    dec hl
    push hl
    call rng_byte
    and 7
    add a, a
    ld e, a
    ld d, 0
    ld hl, obstacle_sizes
    add hl, de
    ld a, [hl+]
    ld d, a                         ; d = W
    ld e, [hl]                      ; e = H
    pop hl
    ld [hl], SPAWN_X
    inc hl
    ld [hl], d
    inc hl
    ld [hl], e
    call rng_byte
    and GAP_MASK
    add a, GAP_MIN
    ld [SPAWN_DIST], a
    ret

; SCORE + 1 (binary and BCD), the game a little faster.
add_point:
    score_plus_one
    ld a, [SPEED]
    cp SPEED_MAX - SPEED_INC + 1
    jr nc, .max
    add a, SPEED_INC
    jr .store
.max:
    ld a, SPEED_MAX
.store:
    ld [SPEED], a
    ret

include "../common/rng.asm"

; Shadow OAM from the game state: sprites 0-1 the runner, then 4 per obstacle slot (columns
; 0-1 of the bottom row, then of the top row; the ones an obstacle does not cover are hidden).
build_oam:
    ld hl, SHADOW_OAM
    ld a, [RUNNER_H]
    ld b, a
    ld a, RUNNER_TOP + 16
    sub b
    ld c, a
    ld [hl+], a
    ld a, RUNNER_X + 8
    ld [hl+], a
    ld a, TILE_HEAD
    ld [hl+], a
    xor a
    ld [hl+], a
    ld a, c
    add a, 8
    ld [hl+], a
    ld a, RUNNER_X + 8
    ld [hl+], a
    ld a, TILE_LEGS
    ld [hl+], a
    xor a
    ld [hl+], a
    ld de, OBSTACLES
    ld b, NUM_SLOTS
.slot:
    push bc
    ld a, [de]                      ; X = OAM x + 8: column 0 at OAM x = X - 8
    sub 8
    ld c, a
    inc de
    ld a, [de]                      ; W
    inc de
    ld b, %0001
    cp 16
    jr c, .narrow
    ld b, %0011
.narrow:
    ld a, [de]                      ; H
    inc de
    cp 16
    jr c, .low
    ld a, b
    add a, a
    add a, a
    or b
    ld b, a
.low:
    ld a, [de]                      ; STATE
    inc de
    and a
    jr nz, .shown
    ld b, 0
.shown:
    push de
    ld a, GROUND_Y + 16 - 8         ; bottom row
    call .pair
    ld a, GROUND_Y + 16 - 16        ; top row
    call .pair
    pop de
    pop bc
    dec b
    jr nz, .slot
    ret
.pair:                              ; a = OAM y; columns 0 and 1 (b bits 0, 1; b >>= 2)
    ld e, a
    call .one
    ld a, c
    add a, 8
    ld c, a
    ld a, e
    call .one
    ld a, c
    sub 8
    ld c, a
    ret
.one:                               ; a = OAM y, c = OAM x; shown if b bit 0 (b >>= 1)
    srl b
    jr c, .put
    xor a
.put:
    ld [hl+], a
    ld a, c
    ld [hl+], a
    ld a, TILE_SOLID
    ld [hl+], a
    xor a
    ld [hl+], a
    ret

; Score digits into the window (called in VBlank).
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
.digit:                             ; low nibble of a at hl (top) / hl + 32 (bottom); hl + 1
    digit_cells
    ret

; Blank the title letters (called in VBlank once a game has started, ~300 cycles).
clear_title:
    xor a
    ld [TITLE_ON], a
    ld hl, TITLE_MAP
    ld de, 32 - TITLE_W
    ld b, TITLE_H
.row:
    ld c, TITLE_W
.tile:
    ld [hl+], a
    dec c
    jr nz, .tile
    add hl, de
    dec b
    jr nz, .row
    ret

; Copied to HRAM_DMA: start OAM DMA from page a, wait the 160 cycles it takes.
dma_routine:
    ldh [rDMA], a
    ld a, 40
.wait:
    dec a
    jr nz, .wait
    ret
dma_routine_end:

; ---------------------------------------------------------------------------------------------
; Tables.

; Feet height at t frames after take-off: 4 * PEAK * t * (FRAMES - t) / FRAMES^2, rounded down
; to even; t = 0 is the ground.
macro arc4
    db (4 * JUMP_PEAK * (\1 + 0) * (JUMP_FRAMES - \1 - 0) / (JUMP_FRAMES * JUMP_FRAMES)) & $FE
    db (4 * JUMP_PEAK * (\1 + 1) * (JUMP_FRAMES - \1 - 1) / (JUMP_FRAMES * JUMP_FRAMES)) & $FE
    db (4 * JUMP_PEAK * (\1 + 2) * (JUMP_FRAMES - \1 - 2) / (JUMP_FRAMES * JUMP_FRAMES)) & $FE
    db (4 * JUMP_PEAK * (\1 + 3) * (JUMP_FRAMES - \1 - 3) / (JUMP_FRAMES * JUMP_FRAMES)) & $FE
endm

jump_arc:
    arc4 0
    arc4 4
    arc4 8
    arc4 12
    arc4 16
    arc4 20
    arc4 24
    arc4 28
    arc4 32
    arc4 36
    arc4 40
    arc4 44
    arc4 48
jump_arc_end:

assert jump_arc_end - jump_arc == JUMP_FRAMES, "one arc entry per frame of the jump"

; (W, H) of an obstacle by the low 3 bits of a random byte.
obstacle_sizes:
    db 8, 8, 8, 8, 8, 8, 8, 8, 8, 8 ; 0-4: small
    db 8, 16                        ; 5: tall
    db 16, 8                        ; 6: wide
    db 16, 16                       ; 7: big
obstacle_sizes_end:

assert obstacle_sizes_end - obstacle_sizes == 16, "8 (W, H) pairs"

; Ground rows (map rows 14-15, 32 columns each: the background wraps every 256 pixels).
ground_map:
    db 4, 4, 5, 4, 4, 4, 6, 4, 5, 4, 4, 6, 4, 4, 4, 5, 4, 6, 4, 4, 5, 4, 4, 4, 6, 4, 4, 5, 4, 4, 6, 4
    db 0, 7, 0, 0, 8, 0, 0, 0, 7, 0, 8, 0, 0, 7, 0, 0, 0, 8, 0, 7, 0, 0, 0, 8, 0, 0, 7, 0, 8, 0, 0, 0
ground_map_end:

assert ground_map_end - ground_map == 64, "two map rows"

; RUNNER in 4x4-pixel cells: letters 4 cells wide and 5 high, a blank cell between them and
; around them; one 32-bit number per cell row (bit 31 = the leftmost cell).
TITLE_R0 equ %0_1110_0_1001_0_1001_0_1001_0_1111_0_1110_00
TITLE_R1 equ %0_1001_0_1001_0_1101_0_1101_0_1000_0_1001_00
TITLE_R2 equ %0_1110_0_1001_0_1011_0_1011_0_1110_0_1110_00
TITLE_R3 equ %0_1010_0_1001_0_1001_0_1001_0_1000_0_1010_00
TITLE_R4 equ %0_1001_0_0110_0_1001_0_1001_0_1111_0_1001_00
TITLE_R5 equ 0

; One quadrant tile: cells 2k, 2k + 1 of cell rows \1 (top) and \2 (bottom), k = \3.
macro quad_cell
    db TILE_QUAD + ((\1 >> (31 - 2 * \3)) & 1) * 8 + ((\1 >> (30 - 2 * \3)) & 1) * 4 + ((\2 >> (31 - 2 * \3)) & 1) * 2 + ((\2 >> (30 - 2 * \3)) & 1)
endm

macro title_row
    quad_cell \1, \2, 0
    quad_cell \1, \2, 1
    quad_cell \1, \2, 2
    quad_cell \1, \2, 3
    quad_cell \1, \2, 4
    quad_cell \1, \2, 5
    quad_cell \1, \2, 6
    quad_cell \1, \2, 7
    quad_cell \1, \2, 8
    quad_cell \1, \2, 9
    quad_cell \1, \2, 10
    quad_cell \1, \2, 11
    quad_cell \1, \2, 12
    quad_cell \1, \2, 13
    quad_cell \1, \2, 14
    quad_cell \1, \2, 15
endm

title_map:
    title_row TITLE_R0, TITLE_R1
    title_row TITLE_R2, TITLE_R3
    title_row TITLE_R4, TITLE_R5
title_map_end:

assert title_map_end - title_map == TITLE_W * TITLE_H, "3 rows of 16 tiles"

; ---------------------------------------------------------------------------------------------
; Graphics: 2 bytes per pixel row (low plane, high plane); shade 3 = both bits set.
macro row2                          ; two pixel rows of shade 3 where \1 has bits
    db \1, \1, \1, \1
endm

tiles:
    ds 16, $00                      ; 0: blank
    ds 16, $FF                      ; 1: solid (obstacles)
    row2 $FF                        ; 2: runner head, a white eye at x 4-5, y 2-3
    row2 $F3
    row2 $FF
    row2 $FF
    row2 $FF                        ; 3: runner body and legs (x 0-1 and 6-7, y 4-7)
    row2 $FF
    row2 $C3
    row2 $C3
    row2 $FF                        ; 4: ground line (y 0-1)
    ds 12, $00
    row2 $FF                        ; 5: ground line, a pebble at x 2-3, y 4-5
    row2 $00
    row2 $30
    row2 $00
    row2 $FF                        ; 6: ground line, a pebble at x 4-5, y 6-7
    row2 $00
    row2 $00
    row2 $0C
    row2 $00                        ; 7: a pebble at x 0-1, y 2-3
    row2 $C0
    row2 $00
    row2 $00
    row2 $00                        ; 8: a pebble at x 6-7, y 4-5
    row2 $00
    row2 $03
    row2 $00
tiles_end:

; Quadrant tile \1: 4x4-pixel squares, bit 3 top-left, 2 top-right, 1 bottom-left, 0 bottom-right.
macro quad_tile
    ds 8, ((\1 >> 3) & 1) * $F0 | ((\1 >> 2) & 1) * $0F
    ds 8, ((\1 >> 1) & 1) * $F0 | (\1 & 1) * $0F
endm

quad_tiles:
    quad_tile 0
    quad_tile 1
    quad_tile 2
    quad_tile 3
    quad_tile 4
    quad_tile 5
    quad_tile 6
    quad_tile 7
    quad_tile 8
    quad_tile 9
    quad_tile 10
    quad_tile 11
    quad_tile 12
    quad_tile 13
    quad_tile 14
    quad_tile 15
quad_tiles_end:

include "../common/digits.asm"

assert tiles_end - tiles <= TILE_QUAD * 16, "tiles overlap the quadrant tiles"
assert quad_tiles_end - quad_tiles == 16 * 16, "16 quadrant tiles"
assert digit_tiles_end - digit_tiles == 10 * 32, "each digit is two tiles"
assert @ < $8000, "runner ROM overflows 32 KiB"

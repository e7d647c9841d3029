; ---------------------------------------------------------------------------------------------
; MAZE: walk a player through a 9x9 block maze to the exit. DMG, ROM only (32 KiB), 60 fps.
; Source of maze.gb; rebuild with `python -m torchrl_dreamer.roms.build` (check with --check).
;
; Screen: the maze is 9x9 cells of 16x16 pixels (144x144 px) at x = 8..151; walls are solid
; black (shade 3), floor white (shade 0), the exit a black/white checkerboard of 4x4-pixel
; squares, the player a black 12x12 ring (sprite) with a white 4x4 hole. Every feature is made of
; 2x2 pixel blocks at even coordinates, so the 2x-decimated 80x72 observation keeps it.
;
; Controls: UP / DOWN / LEFT / RIGHT move one cell: immediately on a new press, then every
; 12 frames while held (so an env step with the button held 8 frames moves exactly once). When
; several directions are held the priority is UP, DOWN, LEFT, RIGHT. Walls block (a blocked move
; counts a bump). START in the waiting / finished state starts the next layout (human play).
;
; Winning (the player steps onto the exit) inverts the palettes: the won screen shows every
; shade inverted until the next game starts, so the win is visible in a single frame.
;
; RAM interface (WRAM):
;   $C000 GAME_STATE  0 = waiting, 1 = playing, 2 = won (player on the exit)
;   $C001 NEW_GAME    write non-zero: a new game starts at the next frame (then cleared)
;   $C002 LAYOUT      maze layout: layout index = LAYOUT & 15 (16 layouts)
;   $C003 WON         1 once the exit is reached, else 0
;   $C004 PLAYER_X    player cell column 0..8 (0 and 8 are the outer walls)
;   $C005 PLAYER_Y    player cell row 0..8
;   $C006 EXIT_X      exit cell column
;   $C007 EXIT_Y      exit cell row
;   $C008 MOVES       successful moves this game (saturates at 255)
;   $C009 BUMPS       moves blocked by a wall this game (saturates at 255)
;   $C00A REPEAT      frames until the held direction repeats (internal)
;   $C00B ACTIVE_LAYOUT  layout index in use (0..15)
;   $C010 MAZE        81 bytes, row-major 9x9: 0 floor, 1 wall, 2 exit
;   $C0F0 FRAME, $C0F1 JOY, $C0F2 JOY_PREV (see ../common/gb.asm)
;
; Task reward (torchrl_dreamer.envs maze task): +1 on the step GAME_STATE becomes 2 (WON = 1),
; which terminates the episode; 0 otherwise.
; ---------------------------------------------------------------------------------------------

include "../common/gb.asm"

NUM_LAYOUTS   equ 16
MAZE_W        equ 9
MAZE_H        equ 9
REPEAT_FRAMES equ 12
CELL_FLOOR    equ 0
CELL_WALL     equ 1
CELL_EXIT     equ 2
WIN_PALETTE   equ %00011011         ; colour n -> shade 3 - n: the whole won screen inverted
TILE_PLAYER   equ 3                 ; 4 sprite tiles: top-left, top-right, bottom-left, bottom-right
MAZE_LEFT_PX  equ 8                 ; screen x of the maze's left edge

section "maze variables", $C003
WON:           ds 1
PLAYER_X:      ds 1
PLAYER_Y:      ds 1
EXIT_X:        ds 1
EXIT_Y:        ds 1
MOVES:         ds 1
BUMPS:         ds 1
REPEAT:        ds 1
ACTIVE_LAYOUT: ds 1

section "maze grid", $C010
MAZE:          ds MAZE_W * MAZE_H

LAYOUT equ SEED

section "maze code", common_code_end
game_init:
    ld hl, tiles
    ld de, $8000
    ld bc, tiles_end - tiles
    call memcpy
    jp lcd_on_and_run

main_loop:
    call wait_frame
    call update_oam                 ; sprite position of the last frame's state (in VBlank)
    call read_joy
    ld a, [NEW_GAME]
    and a
    jr z, .no_request
    call new_game                   ; still in VBlank: it switches the LCD off to redraw
    jr main_loop
.no_request:
    ld a, [GAME_STATE]
    cp STATE_PLAYING
    jr z, .playing
    call joy_pressed                ; waiting / won: START plays the next layout
    and JOY_START
    jr z, main_loop
    ld hl, LAYOUT
    inc [hl]
    ld a, 1
    ld [NEW_GAME], a
    jr main_loop
.playing:
    call update_player
    jr main_loop

; Start a new game on layout LAYOUT & 15. Called at the start of VBlank.
new_game:
    xor a
    ldh [rLCDC], a                  ; LCD off while the whole maze is redrawn (~1/10 frame)
    ld a, [LAYOUT]
    and NUM_LAYOUTS - 1
    ld [ACTIVE_LAYOUT], a
    add a, a
    ld e, a
    ld d, 0
    ld hl, layout_table
    add hl, de
    ld a, [hl+]
    ld h, [hl]
    ld l, a
    ld de, MAZE
    ld bc, MAZE_W * MAZE_H
    call memcpy                     ; hl -> start x, start y, exit x, exit y
    ld a, [hl+]
    ld [PLAYER_X], a
    ld a, [hl+]
    ld [PLAYER_Y], a
    ld a, [hl+]
    ld [EXIT_X], a
    ld a, [hl]
    ld [EXIT_Y], a
    call draw_maze
    ld a, PALETTE
    ldh [rBGP], a
    ldh [rOBP0], a
    xor a
    ld [WON], a
    ld [MOVES], a
    ld [BUMPS], a
    ld [NEW_GAME], a
    ld a, 1
    ld [REPEAT], a                  ; a direction held through the reset moves next frame
    ld a, STATE_PLAYING
    ld [GAME_STATE], a
    call update_oam
    ld a, LCDC_ON
    ldh [rLCDC], a
    ret

; Draw MAZE into the BG map: each cell is 2x2 tiles (tile index = cell value). LCD must be off.
draw_maze:
    ld de, MAZE
    ld hl, BG_MAP + MAZE_LEFT_PX / 8
    ld c, MAZE_H
.row:
    ld b, MAZE_W
.cell:
    ld a, [de]
    inc de
    push bc
    ld [hl+], a
    ld [hl], a
    ld bc, 31
    add hl, bc
    ld [hl+], a
    ld [hl], a
    ld bc, -31
    add hl, bc
    pop bc
    dec b
    jr nz, .cell
    push bc
    ld bc, 64 - 2 * MAZE_W
    add hl, bc
    pop bc
    dec c
    jr nz, .row
    ret

; Write the player's 4 sprites to OAM (hidden while waiting). Call during VBlank.
update_oam:
    ld hl, OAM
    ld a, [GAME_STATE]
    and a
    jr z, .hide
    ld a, [PLAYER_Y]
    swap a
    add a, 16                       ; OAM y = screen y + 16
    ld b, a
    ld a, [PLAYER_X]
    swap a
    add a, MAZE_LEFT_PX + 8         ; OAM x = screen x + 8
    ld c, a
    ld d, TILE_PLAYER
    call .sprite
    ld a, c
    add a, 8
    ld c, a
    call .sprite
    ld a, b
    add a, 8
    ld b, a
    ld a, c
    sub 8
    ld c, a
    call .sprite
    ld a, c
    add a, 8
    ld c, a
.sprite:                            ; OAM entry: y = b, x = c, tile = d (then d + 1)
    ld a, b
    ld [hl+], a
    ld a, c
    ld [hl+], a
    ld a, d
    ld [hl+], a
    inc d
    xor a
    ld [hl+], a
    ret
.hide:
    ld b, 4
    xor a
.hide_loop:
    ld [hl+], a
    inc l
    inc l
    inc l
    dec b
    jr nz, .hide_loop
    ret

; Move on a new direction press, then every REPEAT_FRAMES frames while it is held.
update_player:
    ld a, [JOY]
    and JOY_UP | JOY_DOWN | JOY_LEFT | JOY_RIGHT
    jr nz, .held
    ld [REPEAT], a
    ret
.held:
    ld c, a
    ld a, [JOY_PREV]
    cpl
    and c
    jr z, .repeat
    call try_move                   ; a = newly pressed directions
    ld a, REPEAT_FRAMES
    ld [REPEAT], a
    ret
.repeat:
    ld hl, REPEAT
    dec [hl]
    ret nz
    ld [hl], REPEAT_FRAMES
    ld a, c
    ; fall through

; Try to move one cell in the direction picked from the bits in a (UP, DOWN, LEFT, RIGHT).
try_move:
    ld de, 0                        ; d = dx, e = dy
    bit 6, a
    jr nz, .up
    bit 7, a
    jr nz, .down
    bit 5, a
    jr nz, .left
    ld d, 1
    jr .go
.up:
    ld e, -1
    jr .go
.down:
    ld e, 1
    jr .go
.left:
    ld d, -1
.go:
    ld a, [PLAYER_X]
    add a, d
    ld c, a                         ; c = new x
    ld a, [PLAYER_Y]
    add a, e
    ld b, a                         ; b = new y
    add a, a
    add a, a
    add a, a
    add a, b                        ; y * 9
    add a, c
    ld e, a
    ld d, 0
    ld hl, MAZE
    add hl, de
    ld a, [hl]
    cp CELL_WALL
    jr nz, .free
    ld hl, BUMPS
    inc [hl]
    ret nz
    dec [hl]                        ; saturate at 255
    ret
.free:
    ld d, a
    ld a, c
    ld [PLAYER_X], a
    ld a, b
    ld [PLAYER_Y], a
    ld hl, MOVES
    inc [hl]
    jr nz, .counted
    dec [hl]
.counted:
    ld a, d
    cp CELL_EXIT
    ret nz
    ld a, 1
    ld [WON], a
    ld a, STATE_OVER
    ld [GAME_STATE], a
    ld a, WIN_PALETTE               ; the won screen is shown inverted (new_game restores it)
    ldh [rBGP], a
    ldh [rOBP0], a
    ret

; ---------------------------------------------------------------------------------------------
; Graphics: 2 bytes per pixel row (low plane, high plane); shade 3 = both bits set.
tiles:
    ds 16, $00                      ; 0: floor (white)
    ds 16, $FF                      ; 1: wall (black)
    db $F0, $F0, $F0, $F0, $F0, $F0, $F0, $F0   ; 2: exit, 4x4 checkerboard
    db $0F, $0F, $0F, $0F, $0F, $0F, $0F, $0F
    ; 3..6: player ring, quadrants TL, TR, BL, BR of a 16x16 sprite
    db 0, 0, 0, 0, $3F, $3F, $3F, $3F, $3F, $3F, $3F, $3F, $3C, $3C, $3C, $3C
    db 0, 0, 0, 0, $FC, $FC, $FC, $FC, $FC, $FC, $FC, $FC, $3C, $3C, $3C, $3C
    db $3C, $3C, $3C, $3C, $3F, $3F, $3F, $3F, $3F, $3F, $3F, $3F, 0, 0, 0, 0
    db $3C, $3C, $3C, $3C, $FC, $FC, $FC, $FC, $FC, $FC, $FC, $FC, 0, 0, 0, 0
tiles_end:

; ---------------------------------------------------------------------------------------------
; Layouts: 81 cells (row-major, 0 floor, 1 wall, 2 exit) then start x, y and exit x, y.
; Perfect mazes on the odd cells with 1-3 extra openings; shortest paths 8..16 moves.
layout_table:
    dw maze0, maze1, maze2, maze3, maze4, maze5, maze6, maze7
    dw maze8, maze9, maze10, maze11, maze12, maze13, maze14, maze15

maze0:  ; shortest path 10 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 2, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 0, 1
    db 1, 0, 1, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 1, 1, 0, 1, 0, 1
    db 1, 0, 0, 0, 1, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 1, 1, 0, 1
    db 1, 0, 1, 0, 1, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 2, 5, 6, 1   ; start x, y, exit x, y
maze1:  ; shortest path 14 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 1, 0, 0, 0, 1, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 0, 1
    db 1, 0, 0, 0, 1, 0, 1, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 2, 1
    db 1, 0, 0, 0, 1, 0, 0, 0, 1
    db 1, 1, 1, 0, 1, 1, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 2, 5, 7, 4   ; start x, y, exit x, y
maze2:  ; shortest path 9 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 1, 1, 0, 1
    db 1, 0, 1, 0, 0, 0, 1, 0, 1
    db 1, 0, 1, 0, 1, 2, 1, 0, 1
    db 1, 0, 1, 0, 1, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 1, 1
    db 1, 0, 1, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 3, 5, 4   ; start x, y, exit x, y
maze3:  ; shortest path 8 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 1, 1, 1, 1, 0, 1
    db 1, 0, 0, 0, 1, 0, 0, 2, 1
    db 1, 1, 1, 0, 1, 1, 1, 0, 1
    db 1, 0, 1, 0, 0, 0, 1, 0, 1
    db 1, 0, 1, 1, 1, 0, 1, 0, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 5, 5, 7, 3   ; start x, y, exit x, y
maze4:  ; shortest path 16 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 1, 1, 0, 1
    db 1, 0, 0, 0, 0, 0, 1, 0, 1
    db 1, 0, 1, 1, 1, 0, 1, 0, 1
    db 1, 0, 1, 0, 1, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 0, 1
    db 1, 2, 1, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 3, 5, 1, 7   ; start x, y, exit x, y
maze5:  ; shortest path 11 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 2, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 0, 1
    db 1, 0, 1, 0, 0, 0, 1, 0, 1
    db 1, 0, 1, 1, 1, 0, 1, 0, 1
    db 1, 0, 1, 0, 1, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 1, 1, 0, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 7, 7, 2, 1   ; start x, y, exit x, y
maze6:  ; shortest path 11 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 1, 0, 1, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 1, 1
    db 1, 0, 1, 0, 1, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 1, 1, 0, 1
    db 1, 0, 1, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 2, 1, 0, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 1, 5, 6   ; start x, y, exit x, y
maze7:  ; shortest path 11 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 0, 1
    db 1, 2, 1, 0, 1, 0, 1, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 0, 1
    db 1, 0, 1, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 3, 6, 1, 5   ; start x, y, exit x, y
maze8:  ; shortest path 8 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 1, 0, 1, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 2, 1, 0, 1
    db 1, 0, 1, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 1, 1, 1, 1, 0, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 0, 1, 1, 1, 0, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 6, 7, 5, 2   ; start x, y, exit x, y
maze9:  ; shortest path 12 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 1, 1, 0, 1, 0, 1
    db 1, 0, 0, 0, 1, 0, 0, 0, 1
    db 1, 1, 1, 0, 1, 0, 1, 0, 1
    db 1, 0, 0, 0, 0, 0, 1, 0, 1
    db 1, 0, 1, 0, 1, 1, 1, 0, 1
    db 1, 0, 0, 0, 1, 2, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 3, 1, 5, 7   ; start x, y, exit x, y
maze10:  ; shortest path 8 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 1, 1, 1, 1, 0, 1
    db 1, 0, 0, 0, 2, 0, 1, 0, 1
    db 1, 0, 1, 1, 1, 1, 1, 0, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 3, 6, 4, 3   ; start x, y, exit x, y
maze11:  ; shortest path 15 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 0, 2, 1
    db 1, 0, 1, 1, 1, 1, 1, 0, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 0, 1, 1, 1, 0, 1
    db 1, 0, 0, 0, 1, 0, 0, 0, 1
    db 1, 0, 1, 1, 1, 1, 1, 0, 1
    db 1, 0, 0, 0, 0, 0, 1, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 4, 7, 7, 1   ; start x, y, exit x, y
maze12:  ; shortest path 11 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 1, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 2, 1, 1, 1, 0, 1
    db 1, 0, 1, 0, 0, 0, 1, 0, 1
    db 1, 0, 1, 0, 1, 1, 1, 0, 1
    db 1, 0, 1, 0, 0, 0, 1, 0, 1
    db 1, 0, 1, 0, 1, 0, 1, 0, 1
    db 1, 0, 0, 0, 1, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 3, 3, 2   ; start x, y, exit x, y
maze13:  ; shortest path 12 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 2, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 1, 1, 0, 1, 0, 1
    db 1, 0, 0, 0, 1, 0, 0, 0, 1
    db 1, 1, 1, 0, 1, 0, 1, 0, 1
    db 1, 0, 0, 0, 1, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 7, 6, 2, 1   ; start x, y, exit x, y
maze14:  ; shortest path 8 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 0, 1, 0, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 1, 1, 1, 1, 0, 1
    db 1, 0, 1, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 0, 1, 1, 1, 0, 1
    db 1, 2, 0, 0, 0, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 7, 5, 1, 7   ; start x, y, exit x, y
maze15:  ; shortest path 8 moves
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 1, 0, 2, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 1, 1, 0, 1, 1, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 1, 1, 1, 1, 0, 1
    db 1, 0, 0, 0, 0, 0, 0, 0, 1
    db 1, 0, 1, 1, 1, 0, 1, 0, 1
    db 1, 0, 0, 0, 1, 0, 0, 0, 1
    db 1, 1, 1, 1, 1, 1, 1, 1, 1
    db 4, 5, 2, 1   ; start x, y, exit x, y
assert @ < $8000, "maze ROM overflows 32 KiB"

; ---------------------------------------------------------------------------------------------
; Shared runtime of the games shipped with torchrl_dreamer (assembled with torchrl_dreamer.asm).
;
; Included at the top of each game. Provides hardware register names, the RAM interface fields
; every game shares, the VBlank interrupt vector, hardware init (jumps to the game's
; `game_init`), the frame wait, joypad reading and memory helpers.
;
; Shared RAM interface (WRAM, fixed addresses):
;   $C000 GAME_STATE  0 = waiting for a new game, 1 = playing, 2 = won / game over
;   $C001 NEW_GAME    write non-zero to start a new game at the next frame (the game clears it)
;   $C002 SEED        layout / RNG seed byte read when a new game starts
;   $C0F0 FRAME       frame counter (wraps at 256)
;   $C0F1 JOY         buttons held this frame, same bits as the emulator's button mask:
;                     bit0 A, bit1 B, bit2 SELECT, bit3 START, bit4 RIGHT, bit5 LEFT, bit6 UP,
;                     bit7 DOWN (1 = pressed)
;   $C0F2 JOY_PREV    JOY of the previous frame
;   $C0F3 VBLANK_FLAG set by the VBlank interrupt, cleared by wait_frame
; Game-specific fields live at $C003-$C0EF (see each game).
; ---------------------------------------------------------------------------------------------

; hardware registers
rP1     equ $FF00
rIF     equ $FF0F
rNR52   equ $FF26
rLCDC   equ $FF40
rSTAT   equ $FF41
rSCY    equ $FF42
rSCX    equ $FF43
rLY     equ $FF44
rBGP    equ $FF47
rOBP0   equ $FF48
rOBP1   equ $FF49
rWY     equ $FF4A
rWX     equ $FF4B
rIE     equ $FFFF

LCDC_ON     equ %10010011       ; LCD on, BG+OBJ tiles at $8000, BG map $9800, 8x8 OBJ, BG on
IE_VBLANK   equ %00000001
BG_MAP      equ $9800
OAM         equ $FE00
PALETTE     equ %11100100       ; identity: colour n -> shade n (0 white .. 3 black)

JOY_A       equ $01
JOY_B       equ $02
JOY_SELECT  equ $04
JOY_START   equ $08
JOY_RIGHT   equ $10
JOY_LEFT    equ $20
JOY_UP      equ $40
JOY_DOWN    equ $80

STATE_WAITING equ 0
STATE_PLAYING equ 1
STATE_OVER    equ 2

section "shared interface", $C000
GAME_STATE:  ds 1
NEW_GAME:    ds 1
SEED:        ds 1

section "shared runtime", $C0F0
FRAME:       ds 1
JOY:         ds 1
JOY_PREV:    ds 1
VBLANK_FLAG: ds 1

section "vblank vector", $0040
    push af
    ld a, 1
    ld [VBLANK_FLAG], a
    pop af
    reti

section "common code", $0150
; Entry point (the cartridge header jumps here). Leaves the LCD off, WRAM/VRAM/OAM cleared,
; sound off, palettes set, then jumps to the game's `game_init` (which loads its graphics,
; turns the LCD on with `lcd_on_and_run`).
start:
    di
    ld sp, $E000
    ldh a, [rLCDC]
    bit 7, a
    jr z, .lcd_is_off
.wait_vblank:                   ; the LCD may only be switched off during VBlank
    ldh a, [rLY]
    cp 144
    jr c, .wait_vblank
    xor a
    ldh [rLCDC], a
.lcd_is_off:
    xor a
    ldh [rNR52], a              ; sound off
    ldh [rIF], a
    ldh [rIE], a
    ldh [rSCX], a
    ldh [rSCY], a
    ld hl, $C000                ; clear WRAM inline: the stack lives there
    ld bc, $2000
.clear_wram:
    xor a
    ld [hl+], a
    dec bc
    ld a, b
    or c
    jr nz, .clear_wram
    ld hl, $8000
    ld bc, $2000
    xor a
    call memset
    ld hl, OAM
    ld bc, 160
    xor a
    call memset
    ld a, PALETTE
    ldh [rBGP], a
    ldh [rOBP0], a
    ldh [rOBP1], a
    ld a, 144
    ldh [rWY], a
    jp game_init

; Turn the LCD on, enable the VBlank interrupt and enter the game's `main_loop`.
lcd_on_and_run:
    ld a, IE_VBLANK
    ldh [rIE], a
    xor a
    ldh [rIF], a
    ld a, LCDC_ON
    ldh [rLCDC], a
    ei
    jp main_loop

; Sleep until the next VBlank interrupt; returns right at the start of VBlank.
wait_frame:
    halt
    nop
    ld a, [VBLANK_FLAG]
    and a
    jr z, wait_frame
    xor a
    ld [VBLANK_FLAG], a
    ld hl, FRAME
    inc [hl]
    ret

; Read the joypad into JOY (1 = pressed, bits as documented above); old JOY goes to JOY_PREV.
read_joy:
    ld a, $20                   ; select the direction keys
    ldh [rP1], a
    ldh a, [rP1]
    ldh a, [rP1]
    cpl
    and $0F
    swap a
    ld b, a
    ld a, $10                   ; select the action buttons
    ldh [rP1], a
    ldh a, [rP1]
    ldh a, [rP1]
    ldh a, [rP1]
    cpl
    and $0F
    or b
    ld b, a
    ld a, $30
    ldh [rP1], a
    ld a, [JOY]
    ld [JOY_PREV], a
    ld a, b
    ld [JOY], a
    ret

; a = buttons newly pressed this frame (held now, not held the frame before)
joy_pressed:
    ld a, [JOY_PREV]
    cpl
    ld b, a
    ld a, [JOY]
    and b
    ret

; copy bc bytes from hl to de
memcpy:
    ld a, b
    or c
    ret z
    ld a, [hl+]
    ld [de], a
    inc de
    dec bc
    jr memcpy

; fill bc bytes at hl with a
memset:
    ld d, a
.loop:
    ld a, b
    or c
    ret z
    ld a, d
    ld [hl+], a
    dec bc
    jr .loop

common_code_end:                ; games continue their code from here

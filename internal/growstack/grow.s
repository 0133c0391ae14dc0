//go:build amd64 || arm64

#include "funcdata.h"

// func Grow()
// A 32 KiB frame that is never written: the prologue's stack check grows the stack,
// and the frame holds no pointers for the garbage collector to look at.
TEXT ·Grow(SB), 0, $32768-0
	NO_LOCAL_POINTERS
	RET

/*
 * A stub for every other driver function (wake.h): under `gpureclaim run
 * --resume-on-demand` the interposer hands out, for each driver function
 * it has no wrapper of (kernel launches, copies, synchronisations: the
 * calls a program makes when it touches the GPU again), a stub that
 * checks the page's word and jumps to the function. Its arguments are
 * never read, so one stub fits every prototype: the fast path is two
 * loads, two branches and a jump through its slot, using only the
 * scratch registers a call may clobber before its callee runs (r11 on
 * x86-64; x16 and x17 on AArch64); the slow path saves every argument
 * register, calls gpr_inj_wake_ask, restores them and jumps on, the
 * stack as the caller left it (arguments on the stack included).
 *
 * GPR_INJ_WAKE_STUBS stubs, GPR_INJ_WAKE_STUB_SIZE bytes apart; a driver
 * function gets one slot for good (the same stub each time it is looked
 * up); when they run out, a function passes unwrapped (its calls are then
 * seen only from outside). Elsewhere than x86-64 and AArch64 there are
 * none (gpr_inj_wake_stub returns the function itself).
 */
#include "wake.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "gpureclaim_wake.h"
#include "tracer.h"

#define GPR_INJ_WAKE_STUBS 1024
#define GPR_INJ_WAKE_STUB_SIZE 64

/* What the stubs reach from assembly: hidden, so the references resolve
 * inside this library. */
__attribute__((
    visibility("hidden"))) void *gpr_inj_wake_slots[GPR_INJ_WAKE_STUBS];
__attribute__((visibility("hidden"), used)) void gpr_inj_wake_slow(void);

void gpr_inj_wake_slow(void)
{
	gpr_inj_wake_ask(0);
}

#define STR2(x) #x
#define STR(x) STR2(x)

/* The stubs' symbol and the start of their repetition, each stub 64-byte
 * aligned; `type` is the assembler's word for a function (@ or %). */
/* clang-format off */
#define STUBS_HEAD(type)                                                       \
	".text\n"                                                              \
	".p2align 6\n"                                                         \
	".globl gpr_inj_wake_stubs\n"                                          \
	".hidden gpr_inj_wake_stubs\n"                                         \
	".type gpr_inj_wake_stubs, " type "\n"                                 \
	"gpr_inj_wake_stubs:\n"                                                \
	".set gpr_inj_wake_i, 0\n"                                             \
	".rept " STR(GPR_INJ_WAKE_STUBS) "\n"                                  \
	".p2align 6\n"
/* clang-format on */

#if defined(__x86_64__)
#define GPR_INJ_HAVE_STUBS 1
/* clang-format off */
__asm__(
	STUBS_HEAD("@function")
	"endbr64\n"
	"movq gpr_inj_wake_word(%rip), %r11\n"
	"testq %r11, %r11\n"
	"jz 1f\n"
	"cmpl $0, (%r11)\n"
	"jne 2f\n"
	"1: jmpq *gpr_inj_wake_slots+8*gpr_inj_wake_i(%rip)\n"
	"2: leaq gpr_inj_wake_slots+8*gpr_inj_wake_i(%rip), %r11\n"
	"jmp gpr_inj_wake_tramp\n"
	".set gpr_inj_wake_i, gpr_inj_wake_i+1\n"
	".endr\n"
	".size gpr_inj_wake_stubs, .-gpr_inj_wake_stubs\n"
	".p2align 4\n"
	".type gpr_inj_wake_tramp, @function\n"
	"gpr_inj_wake_tramp:\n"
	"pushq %rbp\n"
	"movq %rsp, %rbp\n"
	"pushq %r11\n"
	"pushq %rdi\n"
	"pushq %rsi\n"
	"pushq %rdx\n"
	"pushq %rcx\n"
	"pushq %r8\n"
	"pushq %r9\n"
	"pushq %rax\n"
	"subq $128, %rsp\n"
	"movdqu %xmm0, 0(%rsp)\n"
	"movdqu %xmm1, 16(%rsp)\n"
	"movdqu %xmm2, 32(%rsp)\n"
	"movdqu %xmm3, 48(%rsp)\n"
	"movdqu %xmm4, 64(%rsp)\n"
	"movdqu %xmm5, 80(%rsp)\n"
	"movdqu %xmm6, 96(%rsp)\n"
	"movdqu %xmm7, 112(%rsp)\n"
	"call gpr_inj_wake_slow\n"
	"movdqu 0(%rsp), %xmm0\n"
	"movdqu 16(%rsp), %xmm1\n"
	"movdqu 32(%rsp), %xmm2\n"
	"movdqu 48(%rsp), %xmm3\n"
	"movdqu 64(%rsp), %xmm4\n"
	"movdqu 80(%rsp), %xmm5\n"
	"movdqu 96(%rsp), %xmm6\n"
	"movdqu 112(%rsp), %xmm7\n"
	"addq $128, %rsp\n"
	"popq %rax\n"
	"popq %r9\n"
	"popq %r8\n"
	"popq %rcx\n"
	"popq %rdx\n"
	"popq %rsi\n"
	"popq %rdi\n"
	"popq %r11\n"
	"popq %rbp\n"
	"jmpq *(%r11)\n"
	".size gpr_inj_wake_tramp, .-gpr_inj_wake_tramp\n");
/* clang-format on */
#elif defined(__aarch64__)
#define GPR_INJ_HAVE_STUBS 1
/* clang-format off */
__asm__(
	STUBS_HEAD("%function")
	"hint #34\n" /* bti c */
	"adrp x16, gpr_inj_wake_word\n"
	"ldr x16, [x16, #:lo12:gpr_inj_wake_word]\n"
	"cbz x16, 1f\n"
	"ldr w17, [x16]\n"
	"cbnz w17, 2f\n"
	"1: adrp x16, gpr_inj_wake_slots+8*gpr_inj_wake_i\n"
	"ldr x16, [x16, #:lo12:gpr_inj_wake_slots+8*gpr_inj_wake_i]\n"
	"br x16\n"
	"2: adrp x16, gpr_inj_wake_slots+8*gpr_inj_wake_i\n"
	"add x16, x16, #:lo12:gpr_inj_wake_slots+8*gpr_inj_wake_i\n"
	"b gpr_inj_wake_tramp\n"
	".set gpr_inj_wake_i, gpr_inj_wake_i+1\n"
	".endr\n"
	".size gpr_inj_wake_stubs, .-gpr_inj_wake_stubs\n"
	".p2align 4\n"
	".type gpr_inj_wake_tramp, %function\n"
	"gpr_inj_wake_tramp:\n"
	"stp x29, x30, [sp, #-224]!\n"
	"mov x29, sp\n"
	"stp x0, x1, [sp, #16]\n"
	"stp x2, x3, [sp, #32]\n"
	"stp x4, x5, [sp, #48]\n"
	"stp x6, x7, [sp, #64]\n"
	"stp x8, x16, [sp, #80]\n"
	"stp q0, q1, [sp, #96]\n"
	"stp q2, q3, [sp, #128]\n"
	"stp q4, q5, [sp, #160]\n"
	"stp q6, q7, [sp, #192]\n"
	"bl gpr_inj_wake_slow\n"
	"ldp q6, q7, [sp, #192]\n"
	"ldp q4, q5, [sp, #160]\n"
	"ldp q2, q3, [sp, #128]\n"
	"ldp q0, q1, [sp, #96]\n"
	"ldp x8, x16, [sp, #80]\n"
	"ldp x6, x7, [sp, #64]\n"
	"ldp x4, x5, [sp, #48]\n"
	"ldp x2, x3, [sp, #32]\n"
	"ldp x0, x1, [sp, #16]\n"
	"ldp x29, x30, [sp], #224\n"
	"ldr x16, [x16]\n"
	"br x16\n"
	".size gpr_inj_wake_tramp, .-gpr_inj_wake_tramp\n");
/* clang-format on */
#endif

#ifdef GPR_INJ_HAVE_STUBS
extern const char gpr_inj_wake_stubs[] __attribute__((visibility("hidden")));
static _Atomic int used;
static pthread_mutex_t add_lock = PTHREAD_MUTEX_INITIALIZER;

static void *stub_of(int i)
{
	return (void *)(gpr_inj_wake_stubs +
			(size_t)i * GPR_INJ_WAKE_STUB_SIZE);
}

void *gpr_inj_wake_stub(void *fn)
{
	if (!fn)
		return fn;
	int n = atomic_load_explicit(&used, memory_order_acquire);
	for (int i = 0; i < n; i++)
		if (gpr_inj_wake_slots[i] == fn)
			return stub_of(i);
	pthread_mutex_lock(&add_lock);
	n = atomic_load_explicit(&used, memory_order_acquire);
	int at = -1;
	for (int i = 0; i < n && at < 0; i++)
		if (gpr_inj_wake_slots[i] == fn)
			at = i;
	if (at < 0 && n < GPR_INJ_WAKE_STUBS) {
		at = n;
		gpr_inj_wake_slots[at] = fn;
		atomic_store_explicit(&used, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&add_lock);
	return at < 0 ? fn : stub_of(at);
}
#else
void *gpr_inj_wake_stub(void *fn)
{
	return fn;
}
#endif

/* The page's functions for the rest of the process (gpureclaim_wake.h):
 * the agent's extension uses this library's page when it is here. */
GPR_EXPORT int gpureclaim_wake_start(void)
{
	return gpr_inj_wake_start();
}

GPR_EXPORT int gpureclaim_wake_state(void)
{
	return gpr_inj_wake_state();
}

GPR_EXPORT int gpureclaim_wake_ask(double max_seconds)
{
	return gpr_inj_wake_ask(max_seconds);
}

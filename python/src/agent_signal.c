/*
 * The agent's socket removed when its process ends by SIGTERM or SIGHUP
 * at their default action, which kills it without atexit (issue 33: the
 * socket stayed). A C handler, installed only where the signal's action
 * is the default, unlinks the socket if it is still the agent's (same
 * device and inode) and this is the process that made it, then restores
 * the default action and raises the signal again: the process ends as it
 * would have, with the same status. Python cannot do it: its handlers run
 * in the main thread between bytecodes, after whatever C call the program
 * is in returns. Only async-signal-safe calls in the handler.
 */
#include "ext.h"

#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const int caught[] = {SIGTERM, SIGHUP};
#define N_CAUGHT (sizeof(caught) / sizeof(caught[0]))

static char sock_path[PATH_MAX];
static dev_t sock_dev;
static ino_t sock_ino;
static volatile sig_atomic_t owner; /* the pid that armed it; 0: disarmed */
static int installed[N_CAUGHT];

static void on_signal(int sig)
{
	struct stat st;
	if (owner && owner == (sig_atomic_t)getpid() &&
	    lstat(sock_path, &st) == 0 && st.st_dev == sock_dev &&
	    st.st_ino == sock_ino)
		unlink(sock_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

PyObject *gpr_py_agent_signals(PyObject *module, PyObject *args)
{
	(void)module;
	const char *path = NULL;
	unsigned long long dev = 0, ino = 0;
	if (!PyArg_ParseTuple(args, "|zKK", &path, &dev, &ino))
		return NULL;
	owner = 0; /* the handler ignores what follows until it is armed */
	if (!path) {
		for (size_t i = 0; i < N_CAUGHT; i++) {
			struct sigaction now;
			if (installed[i] &&
			    sigaction(caught[i], NULL, &now) == 0 &&
			    now.sa_handler == on_signal)
				signal(caught[i], SIG_DFL);
			installed[i] = 0;
		}
		Py_RETURN_NONE;
	}
	if (strlen(path) >= sizeof(sock_path)) {
		PyErr_SetString(PyExc_ValueError, "socket path too long");
		return NULL;
	}
	memcpy(sock_path, path, strlen(path) + 1);
	sock_dev = (dev_t)dev;
	sock_ino = (ino_t)ino;
	owner = (sig_atomic_t)getpid();
	for (size_t i = 0; i < N_CAUGHT; i++) {
		struct sigaction now, act;
		if (sigaction(caught[i], NULL, &now) != 0 ||
		    (now.sa_handler != SIG_DFL &&
		     now.sa_handler != on_signal) ||
		    (now.sa_flags & SA_SIGINFO))
			continue; /* the program's own: left alone */
		memset(&act, 0, sizeof(act));
		act.sa_handler = on_signal;
		sigemptyset(&act.sa_mask);
		if (sigaction(caught[i], &act, NULL) == 0)
			installed[i] = 1;
	}
	Py_RETURN_NONE;
}

/*
 * `top` on a terminal, with ncurses (Debian's libncursesw): the lines of
 * cli/top_view.c drawn, the keys taken, the terminal left as it was on
 * every way out.
 *
 * Why ncurses: it knows each terminal's sequences from terminfo (over
 * ssh, in tmux, a dumb or an old terminal), redraws only what changed,
 * handles the alternate screen and the keypad, and is on every Linux
 * machine; a hand-written set of escape sequences would know one
 * terminal. It is linked by the command only (never the core, the
 * tracer or the extension).
 *
 * The loop waits in poll() on the keyboard and on one pipe that wakes it:
 * the reader's thread writes to it when a reading is published
 * (cli/top_read.c), an action's thread when it ends (cli/top_act.c), the
 * signal handlers on SIGINT, SIGTERM, SIGHUP (quit) and SIGWINCH (the
 * window's new size is read and the screen laid out again). Nothing here
 * waits on NVML or an agent.
 *
 * The terminal is left as it was on q, on those signals (the loop ends and
 * endwin() runs) and on a crash: SIGSEGV, SIGBUS, SIGFPE, SIGILL and
 * SIGABRT write the terminal's own strings to leave the alternate screen,
 * show the cursor and reset the attributes (read from terminfo at the
 * start: rmcup, cnorm, sgr0) and restore the saved terminal modes
 * (tcsetattr), both async-signal-safe, then die of the signal as they
 * would have. What the program writes on stderr meanwhile goes to a pipe,
 * is shown on the bottom line, and is written to stderr once the
 * terminal is back, so nothing is lost and nothing garbles the screen.
 */
#include "top.h"

#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <term.h> /* tigetstr; its capability macros are not ours: */
#undef lines
#undef columns
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "out/fmt.h"

/* ---------------- the terminal, and giving it back ---------------- */

static struct {
	SCREEN *scr;
	int tty;	      /* the terminal's descriptor (stdout) */
	struct termios saved; /* its modes before ncurses */
	int have_saved;
	char leave[256]; /* rmcup cnorm sgr0, from terminfo */
	size_t leave_len;
	int wake[2];	 /* read end polled; written by everyone */
	int err_pipe[2]; /* stderr while the screen is up */
	int stderr_fd;	 /* the real stderr, kept */
	volatile sig_atomic_t quit;
} T = {.wake = {-1, -1}, .err_pipe = {-1, -1}, .stderr_fd = -1};

static void on_crash(int sig)
{
	if (T.leave_len && write(T.tty, T.leave, T.leave_len) < 0) {
		/* nothing more can be done for the terminal */
	}
	if (T.have_saved)
		tcsetattr(T.tty, TCSAFLUSH, &T.saved);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void on_quit(int sig)
{
	T.quit = sig;
	char c = 'q';
	if (write(T.wake[1], &c, 1) < 0) {
		/* a full pipe wakes the loop already */
	}
}

static void on_winch(int sig)
{
	(void)sig;
	char c = 'w';
	if (write(T.wake[1], &c, 1) < 0) {
		/* a full pipe wakes the loop already */
	}
}

static void handle(int sig, void (*fn)(int), int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

/* The terminal's own string `cap` appended to T.leave. */
static void keep_cap(const char *cap)
{
	char *s = tigetstr((char *)cap);
	if (!s || s == (char *)-1)
		return;
	size_t n = strlen(s);
	if (T.leave_len + n < sizeof(T.leave)) {
		memcpy(T.leave + T.leave_len, s, n);
		T.leave_len += n;
	}
}

/* ---------------- colours ---------------- */

static attr_t attrs[GPR_CLI_TOP_ROLES];

static void set_attrs(int color)
{
	for (int i = 0; i < GPR_CLI_TOP_ROLES; i++)
		attrs[i] = A_NORMAL;
	attrs[GPR_CLI_TOP_TITLE] = A_BOLD;
	attrs[GPR_CLI_TOP_DIM] = A_DIM;
	attrs[GPR_CLI_TOP_HEAD] = A_REVERSE;
	attrs[GPR_CLI_TOP_SELECTED] = A_REVERSE | A_BOLD;
	attrs[GPR_CLI_TOP_STATUS] = A_REVERSE;
	attrs[GPR_CLI_TOP_ERROR] = A_BOLD;
	attrs[GPR_CLI_TOP_FREE] = A_DIM;
	if (!color)
		return;
	start_color();
	use_default_colors();
	/* role, foreground, background (-1: the terminal's own) */
	static const short pairs[][3] = {
	    {GPR_CLI_TOP_WARN, COLOR_YELLOW, -1},
	    {GPR_CLI_TOP_ERROR, COLOR_RED, -1},
	    {GPR_CLI_TOP_BUSY, COLOR_GREEN, -1},
	    {GPR_CLI_TOP_LIVE, COLOR_WHITE, COLOR_BLUE},
	    {GPR_CLI_TOP_RELEASABLE, COLOR_BLACK, COLOR_GREEN},
	    {GPR_CLI_TOP_NOT_RELEASABLE, COLOR_BLACK, COLOR_YELLOW},
	    {GPR_CLI_TOP_WORKSPACES, COLOR_WHITE, COLOR_MAGENTA},
	    {GPR_CLI_TOP_POOLS, COLOR_BLACK, COLOR_CYAN},
	    {GPR_CLI_TOP_REST, COLOR_BLACK, COLOR_WHITE},
	    {GPR_CLI_TOP_NO_AGENT, COLOR_WHITE, COLOR_RED},
	    {GPR_CLI_TOP_PROC0, COLOR_BLACK, COLOR_CYAN},
	    {GPR_CLI_TOP_PROC0 + 1, COLOR_BLACK, COLOR_GREEN},
	    {GPR_CLI_TOP_PROC0 + 2, COLOR_BLACK, COLOR_YELLOW},
	    {GPR_CLI_TOP_PROC0 + 3, COLOR_WHITE, COLOR_MAGENTA},
	    {GPR_CLI_TOP_PROC0 + 4, COLOR_WHITE, COLOR_BLUE},
	    {GPR_CLI_TOP_PROC0 + 5, COLOR_BLACK, COLOR_WHITE},
	};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(*pairs); i++) {
		short n = (short)(i + 1);
		if (n >= COLOR_PAIRS)
			break;
		init_pair(n, pairs[i][1], pairs[i][2]);
		attrs[pairs[i][0]] |= COLOR_PAIR(n);
	}
	attrs[GPR_CLI_TOP_OTHERS] = A_REVERSE | A_DIM;
}

/* ---------------- drawing ---------------- */

static void draw(const struct gpr_cli_top_screen *s)
{
	erase();
	for (size_t i = 0; i < s->n && (int)i < LINES; i++) {
		const struct gpr_cli_top_line *ln = &s->lines[i];
		const char *t = ln->text.data, *r = ln->roles.data;
		size_t len = ln->text.len, at = 0;
		move((int)i, 0);
		while (at < len) {
			size_t end = at;
			while (end < len && r[end] == r[at])
				end++;
			int role = (unsigned char)r[at];
			attrset(role < GPR_CLI_TOP_ROLES ? attrs[role]
							 : A_NORMAL);
			addnstr(t + at, (int)(end - at));
			at = end;
		}
		attrset(A_NORMAL);
	}
	wnoutrefresh(stdscr);
	doupdate();
}

/* ---------------- what the keys do ---------------- */

struct state {
	const struct gpr_cli_top_opts *o;
	struct gpr_cli_top_reader *reader;
	struct gpr_cli_top_reading *reading;
	struct gpr_cli_top_ui ui;
	int confirm; /* the action a 'y' starts (0: none) */
	long confirm_pid;
	char stderr_line[512]; /* the last line written to stderr */
	struct gpr__buf stderr_all;
	/* the profile's: when the running action was asked for (its 'y'),
	 * and its outcome, once on the screen: "kind ms agent_seconds" */
	double act_t0;
	int act_shown; /* an outcome to time at the next draw */
	int act_kind;
	double act_agent_s;
	struct gpr__buf acts;
};

static void say(struct state *s, int role, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(struct state *s, int role, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->ui.bottom, sizeof(s->ui.bottom), fmt, ap);
	va_end(ap);
	s->ui.bottom_role = role;
}

/* The selected process's entry in a fresh list (free *all after). */
static const struct gpr_cli_top_entry *
selected(struct state *s, struct gpr_cli_top_entry **all, size_t *n, size_t *at)
{
	*all = NULL;
	*n = s->reading ? gpr_cli_top_entries(s->reading, s->ui.sort, all) : 0;
	for (size_t i = 0; i < *n; i++)
		if (s->ui.selected && (*all)[i].row->pid == s->ui.sel_pid &&
		    (*all)[i].gpu->index == s->ui.sel_gpu) {
			*at = i;
			return &(*all)[i];
		}
	return NULL;
}

static void move_by(struct state *s, int delta, int to_end)
{
	struct gpr_cli_top_entry *all;
	size_t n, at = 0;
	selected(s, &all, &n, &at);
	if (!n) {
		free(all);
		return;
	}
	long k = to_end < 0 ? 0 : to_end > 0 ? (long)n - 1 : (long)at + delta;
	if (k < 0)
		k = 0;
	if (k >= (long)n)
		k = (long)n - 1;
	s->ui.selected = 1;
	s->ui.sel_pid = all[k].row->pid;
	s->ui.sel_gpu = all[k].gpu->index;
	free(all);
}

/* What pid's agent last said a release would give back on every GPU;
 * -1 when unknown. */
static long long releasable_all(const struct gpr_cli_ps_agent *a);

static long long releasable_of_pid(struct state *s, long pid)
{
	return s->reading ? releasable_all(
				gpr_cli_ps_agent_of(&s->reading->agents, pid))
			  : -1;
}

/* What a release of the process would give back on every GPU its agent
 * explained (its answer's releasable parts); -1 when unknown. */
static long long releasable_all(const struct gpr_cli_ps_agent *a)
{
	if (!a || !a->ok)
		return -1;
	long long sum = 0;
	for (size_t i = 0; i + GPR_CLI_PS_GPU_INTS <= a->n_groups;
	     i += GPR_CLI_PS_GPU_INTS)
		sum += a->groups[i + 3] > 0 ? a->groups[i + 3] : 0;
	return sum;
}

static void ask_release(struct state *s, const struct gpr_cli_top_entry *e)
{
	char x[24];
	long long bytes = releasable_all(e->agent);
	s->confirm = GPR_CLI_TOP_RELEASE;
	s->confirm_pid = e->row->pid;
	if (bytes >= 0)
		say(s, GPR_CLI_TOP_WARN,
		    "Release %u's caches: %s (%lld bytes), as its agent says? "
		    "y/n",
		    e->row->pid, gpr__fmt_bytes((uint64_t)bytes, x, sizeof(x)),
		    bytes);
	else
		say(s, GPR_CLI_TOP_WARN,
		    "Release %u's caches (its agent has not said how much)? "
		    "y/n",
		    e->row->pid);
}

static void ask_holders(struct state *s, const struct gpr_cli_top_entry *e)
{
	char x[24] = "?";
	s->confirm = GPR_CLI_TOP_HOLDERS;
	s->confirm_pid = e->row->pid;
	if (e->parts_known)
		gpr__fmt_bytes(e->parts[0] > 0 ? (uint64_t)e->parts[0] : 0, x,
			       sizeof(x));
	say(s, GPR_CLI_TOP_WARN,
	    "Walk %u's heap for who holds its %s live on GPU %d? y/n",
	    e->row->pid, x, e->gpu->index);
}

/* The bytes a resume takes back: the GPUs' records of the process. */
static void ask_resume(struct state *s, const struct gpr_cli_top_entry *e)
{
	uint64_t back = 0, host = 0;
	int host_known = 0;
	const struct gpr_cli_ps_round *r = &s->reading->round;
	for (size_t k = 0; k < r->n; k++)
		for (size_t p = 0; p < r->gpus[k].n; p++) {
			const struct gpr_cli_ps_row *row = &r->gpus[k].rows[p];
			if (row->pid != e->row->pid || !row->recorded)
				continue;
			back += row->released;
			host = row->host_bytes; /* the process's, on each */
			host_known = row->host_known;
		}
	char x[24], y[24];
	s->confirm = GPR_CLI_TOP_RESUME;
	s->confirm_pid = e->row->pid;
	if (host_known)
		say(s, GPR_CLI_TOP_WARN,
		    "Resume %u: restore %s (%llu bytes) on the GPU from %s in "
		    "host "
		    "memory? y/n",
		    e->row->pid, gpr__fmt_bytes(back, x, sizeof x),
		    (unsigned long long)back,
		    gpr__fmt_bytes(host, y, sizeof y));
	else
		say(s, GPR_CLI_TOP_WARN,
		    "Resume %u: restore %s (%llu bytes) on the GPU? y/n",
		    e->row->pid, gpr__fmt_bytes(back, x, sizeof x),
		    (unsigned long long)back);
}

static double wall_seconds(void);

static void start(struct state *s, int kind, long pid)
{
	s->act_t0 = wall_seconds();
	/* each key bounded as its command is by default (explain --pid
	 * --holders 10 s; release --pid, reclaim, suspend 30 s), not by
	 * --timeout, which bounds the readings */
	double bound = kind == GPR_CLI_TOP_HOLDERS ? 10 : 30;
	if (gpr_cli_top_act_start(kind, pid, bound, T.wake[1]) != 0) {
		say(s, GPR_CLI_TOP_WARN, "an action runs still: wait for it");
		return;
	}
	switch (kind) {
	case GPR_CLI_TOP_RELEASE:
		say(s, GPR_CLI_TOP_STATUS, "releasing the caches of %ld...",
		    pid);
		break;
	case GPR_CLI_TOP_HOLDERS:
		say(s, GPR_CLI_TOP_STATUS, "asking %ld who holds its memory...",
		    pid);
		break;
	case GPR_CLI_TOP_RECLAIM_DRY:
		say(s, GPR_CLI_TOP_STATUS,
		    "reclaim --dry-run: asking every agent...");
		break;
	case GPR_CLI_TOP_SUSPEND_DRY:
		say(s, GPR_CLI_TOP_STATUS, "suspend --dry-run of %ld...", pid);
		break;
	case GPR_CLI_TOP_SUSPEND:
		say(s, GPR_CLI_TOP_STATUS,
		    "suspending %ld (its cache released first)...", pid);
		break;
	case GPR_CLI_TOP_RESUME:
		say(s, GPR_CLI_TOP_STATUS, "resuming %ld...", pid);
		break;
	default:
		say(s, GPR_CLI_TOP_STATUS, "reclaim: every agent releasing...");
	}
}

/* An action ended: its outcome on the bottom line (and the holders'
 * report filling the screen). */
static void ended(struct state *s)
{
	struct gpr_cli_top_done d;
	if (!gpr_cli_top_act_take(&d))
		return;
	if (d.kind == GPR_CLI_TOP_HOLDERS && d.ok) {
		s->ui.paging = 1;
		s->ui.page_first = 0;
		gpr__buf_reset(&s->ui.page);
		gpr__buf_putn(&s->ui.page, d.text.data ? d.text.data : "",
			      d.text.len);
		snprintf(s->ui.page_title, sizeof(s->ui.page_title),
			 "gpureclaim explain --pid %ld --holders", d.pid);
		s->ui.bottom[0] = '\0';
	} else if (d.kind == GPR_CLI_TOP_SUSPEND_DRY && d.ok) {
		char x[24], y[24];
		s->confirm = GPR_CLI_TOP_SUSPEND;
		s->confirm_pid = d.pid;
		long long cache = releasable_of_pid(s, d.pid);
		gpr__fmt_bytes(d.bytes > 0 ? (uint64_t)d.bytes : 0, x,
			       sizeof x);
		if (cache > 0)
			say(s, GPR_CLI_TOP_WARN,
			    "Suspend %ld: %s cache released, the rest of %s "
			    "(%lld "
			    "bytes) to host memory? y/n",
			    d.pid, gpr__fmt_bytes((uint64_t)cache, y, sizeof y),
			    x, d.bytes);
		else
			say(s, GPR_CLI_TOP_WARN,
			    "Suspend %ld: %s (%lld bytes) to host memory? y/n",
			    d.pid, x, d.bytes);
	} else if (d.kind == GPR_CLI_TOP_RECLAIM_DRY && d.ok &&
		   d.processes + d.failed == 0) {
		say(s, GPR_CLI_TOP_WARN,
		    "reclaim: no process with an agent to ask (docs/agent.md)");
	} else if (d.kind == GPR_CLI_TOP_RECLAIM_DRY && d.ok) {
		char x[24];
		s->confirm = GPR_CLI_TOP_RECLAIM;
		say(s, GPR_CLI_TOP_WARN,
		    "Reclaim %s (%lld bytes) from %d process%s? y/n",
		    gpr__fmt_bytes(d.bytes > 0 ? (uint64_t)d.bytes : 0, x,
				   sizeof(x)),
		    d.bytes, d.processes, d.processes != 1 ? "es" : "");
	} else {
		say(s, d.ok ? GPR_CLI_TOP_STATUS : GPR_CLI_TOP_ERROR, "%s",
		    d.line);
	}
	if (d.ok && d.kind != GPR_CLI_TOP_HOLDERS &&
	    d.kind != GPR_CLI_TOP_RECLAIM_DRY &&
	    d.kind != GPR_CLI_TOP_SUSPEND_DRY) /* the figures changed */
		gpr_cli_top_reader_poke(s->reader);
	s->act_shown = 1;
	s->act_kind = d.kind;
	s->act_agent_s = d.seconds;
	gpr__buf_free(&d.text);
}

/* Why the selected process e cannot take key ch now, or NULL. */
static const char *refused(const struct gpr_cli_top_entry *e, int ch)
{
	int frozen = e->row->recorded;
	if (gpr_cli_top_act_busy())
		return "an action runs still: wait for it";
	if (ch == 'z' && frozen)
		return "is suspended already: u resumes it";
	if (ch == 'u' && !frozen)
		return "is not suspended by gpureclaim";
	if ((ch == 'r' || ch == 'h') && frozen)
		return "is suspended: its agent answers once it is resumed (u)";
	if ((ch == 'r' || ch == 'h') && !e->agent)
		return "runs no agent: only the process can give its memory "
		       "back (GPURECLAIM_AGENT=1, docs/agent.md)";
	return NULL;
}

/* r, h, z, u: the selected process's question (or the dry run that
 * makes it), or why not. */
static void process_key(struct state *s, int ch)
{
	struct gpr_cli_top_entry *all;
	size_t n, at;
	const struct gpr_cli_top_entry *e = selected(s, &all, &n, &at);
	const char *no = e ? refused(e, ch) : NULL;
	if (!e)
		say(s, GPR_CLI_TOP_WARN, "no process selected");
	else if (no && strncmp(no, "an action", 9) == 0)
		say(s, GPR_CLI_TOP_WARN, "%s", no);
	else if (no)
		say(s, GPR_CLI_TOP_WARN, "%u %s", e->row->pid, no);
	else if (ch == 'r')
		ask_release(s, e);
	else if (ch == 'h')
		ask_holders(s, e);
	else if (ch == 'z') /* its checks first: the question says them */
		start(s, GPR_CLI_TOP_SUSPEND_DRY, e->row->pid);
	else
		ask_resume(s, e);
	free(all);
}

/* One key; 1 to quit. */
static int key(struct state *s, int ch)
{
	if (s->confirm) {
		int kind = s->confirm;
		s->confirm = 0;
		if (ch == 'y' || ch == 'Y')
			start(s, kind, s->confirm_pid);
		else
			say(s, GPR_CLI_TOP_STATUS, "nothing done");
		return 0;
	}
	if (s->ui.paging) {
		if (ch == 'q' || ch == 27 || ch == 'h' || ch == KEY_LEFT) {
			s->ui.paging = 0;
			return 0;
		}
		int page = LINES > 3 ? LINES - 3 : 1;
		s->ui.page_first += ch == KEY_DOWN || ch == 'j'	   ? 1
				    : ch == KEY_UP || ch == 'k'	   ? -1
				    : ch == KEY_NPAGE || ch == ' ' ? page
				    : ch == KEY_PPAGE		   ? -page
				    : ch == KEY_HOME || ch == 'g'  ? -1000000
				    : ch == KEY_END || ch == 'G'   ? 1000000
								   : 0;
		return 0;
	}
	int page = s->ui.list_rows > 1 ? s->ui.list_rows - 1 : 1;
	switch (ch) {
	case 'q':
	case 'Q':
		return 1;
	case KEY_UP:
	case 'k':
		move_by(s, -1, 0);
		return 0;
	case KEY_DOWN:
	case 'j':
		move_by(s, 1, 0);
		return 0;
	case KEY_PPAGE:
		move_by(s, -page, 0);
		return 0;
	case KEY_NPAGE:
		move_by(s, page, 0);
		return 0;
	case KEY_HOME:
	case 'g':
		move_by(s, 0, -1);
		return 0;
	case KEY_END:
	case 'G':
		move_by(s, 0, 1);
		return 0;
	case 's':
		s->ui.sort = !s->ui.sort;
		s->ui.bottom[0] = '\0';
		return 0;
	case 'R':
		start(s, GPR_CLI_TOP_RECLAIM_DRY, 0);
		return 0;
	case 'z':
	case 'u':
	case 'r':
	case 'h':
		process_key(s, ch);
		return 0;
	case 27: /* Esc: the bottom line back to the keys */
		s->ui.bottom[0] = '\0';
		return 0;
	default:
		return 0;
	}
}

/* What was written to stderr since: kept, its last line shown. */
static void drain_stderr(struct state *s)
{
	char buf[4096];
	ssize_t n;
	int got = 0;
	while (T.err_pipe[0] >= 0 &&
	       (n = read(T.err_pipe[0], buf, sizeof(buf))) > 0) {
		gpr__buf_putn(&s->stderr_all, buf, (size_t)n);
		got = 1;
	}
	if (!got)
		return;
	const char *all = gpr__buf_str(&s->stderr_all);
	size_t len = s->stderr_all.len;
	while (len && all[len - 1] == '\n')
		len--;
	size_t start = len;
	while (start && all[start - 1] != '\n')
		start--;
	snprintf(s->stderr_line, sizeof(s->stderr_line), "%.*s",
		 (int)(len - start), all + start);
	if (!s->confirm && s->stderr_line[0])
		say(s, GPR_CLI_TOP_ERROR, "%s", s->stderr_line);
}

static void resize(void)
{
	struct winsize ws;
	if (ioctl(T.tty, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
		resizeterm(ws.ws_row, ws.ws_col);
}

/* ---------------- the profile (GPURECLAIM_TOP_PROFILE) ---------------- */

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* every thread's CPU time, the agents' and the reader's included */
static double cpu_seconds(void)
{
	return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

static double wall_seconds(void)
{
	return clock_s(CLOCK_MONOTONIC);
}

/* ---------------- setting up, and the loop ---------------- */

static int setup(int color, int *ascii)
{
	T.tty = STDOUT_FILENO;
	setlocale(LC_ALL, "");
	*ascii = strcmp(nl_langinfo(CODESET), "UTF-8") != 0;
	if (tcgetattr(T.tty, &T.saved) == 0)
		T.have_saved = 1;
	if (pipe2(T.wake, O_CLOEXEC | O_NONBLOCK) != 0)
		return -1;
	/* ours before ncurses starts, so it keeps them */
	handle(SIGWINCH, on_winch, SA_RESTART);
	handle(SIGINT, on_quit, 0);
	handle(SIGTERM, on_quit, 0);
	handle(SIGHUP, on_quit, 0);
	signal(SIGPIPE, SIG_IGN);
	/* the terminal's description first: a newterm that cannot find it
	 * fails leaving what it allocated (ncurses' pre-screen) behind */
	int err = 0;
	if (setupterm(NULL, T.tty, &err) != OK)
		return -1;
	del_curterm(cur_term);
	T.scr = newterm(NULL, stdout, stdin);
	if (!T.scr)
		return -1;
	set_term(T.scr);
	keep_cap("rmcup");
	keep_cap("cnorm");
	keep_cap("sgr0");
	static const int crashes[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
	for (size_t i = 0; i < sizeof(crashes) / sizeof(*crashes); i++)
		handle(crashes[i], on_crash, SA_RESETHAND);
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	set_escdelay(25);
	curs_set(0);
	set_attrs(color && has_colors());
	/* stderr into a pipe while the screen is up */
	if (pipe2(T.err_pipe, O_CLOEXEC | O_NONBLOCK) == 0) {
		fflush(stderr);
		T.stderr_fd = dup(STDERR_FILENO);
		if (T.stderr_fd >= 0)
			dup2(T.err_pipe[1], STDERR_FILENO);
	}
	return 0;
}

static void teardown(struct state *s)
{
	if (T.scr) {
		endwin();
		delscreen(T.scr);
		T.scr = NULL;
	}
	static const int sigs[] = {SIGSEGV, SIGBUS,  SIGFPE, SIGILL,  SIGABRT,
				   SIGINT,  SIGTERM, SIGHUP, SIGWINCH};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(*sigs); i++)
		signal(sigs[i], SIG_DFL);
	if (T.stderr_fd >= 0) {
		fflush(stderr);
		dup2(T.stderr_fd, STDERR_FILENO);
		close(T.stderr_fd);
		T.stderr_fd = -1;
		drain_stderr(s);
		if (s->stderr_all.len &&
		    write(STDERR_FILENO, s->stderr_all.data,
			  s->stderr_all.len) < 0) {
			/* stderr is gone: nothing to tell */
		}
	}
	for (int i = 0; i < 2; i++) {
		if (T.err_pipe[i] >= 0)
			close(T.err_pipe[i]);
		T.err_pipe[i] = -1;
	}
}

int gpr_cli_top_screen(const struct gpr_cli_top_opts *o)
{
	struct state s = {.o = o};
	int ascii = 0;
	if (setup(o->color, &ascii) != 0) {
		const char *term = getenv("TERM");
		teardown(&s);
		fprintf(stderr,
			"gpureclaim top: cannot use this terminal (TERM=%s); "
			"gpureclaim top | cat prints one reading\n",
			term ? term : "unset");
		return GPR_CLI_ERROR;
	}
	s.reader = gpr_cli_top_reader_start(o->ctx, o->select, o->n_select,
					    o->interval, o->timeout, T.wake[1]);
	if (!s.reader) {
		teardown(&s);
		fprintf(stderr, "gpureclaim top: out of memory\n");
		return GPR_CLI_ERROR;
	}
	struct gpr_cli_top_screen screen = {0};
	const char *prof = getenv("GPURECLAIM_TOP_PROFILE");
	int profile = prof && *prof && strcmp(prof, "0") != 0;
	struct gpr__buf draws = {0}; /* each view and draw, in ms */
	size_t n_draws = 0;
	double cpu0 = cpu_seconds();
	for (;;) {
		struct gpr_cli_top_reading *r =
		    gpr_cli_top_reader_take(s.reader);
		if (r) {
			gpr_cli_top_reading_free(s.reading);
			free(s.reading);
			s.reading = r;
		}
		ended(&s);
		drain_stderr(&s);
		if (T.quit)
			break;
		if (s.reading) {
			double t0 = profile ? wall_seconds() : 0;
			struct gpr_cli_top_layout l = {COLS, LINES, ascii};
			gpr_cli_top_view(s.reading, &s.ui, &l, &screen);
			draw(&screen);
			if (profile) {
				double t1 = wall_seconds();
				gpr__buf_printf(&draws, " %.3f",
						(t1 - t0) * 1e3);
				n_draws++;
				if (s.act_shown)
					gpr__buf_printf(
					    &s.acts,
					    "top-profile act %d %.3f %.6f\n",
					    s.act_kind, (t1 - s.act_t0) * 1e3,
					    s.act_agent_s);
			}
			s.act_shown = 0;
		}
		struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
				      {.fd = T.wake[0], .events = POLLIN}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		char buf[64];
		ssize_t n;
		int winch = 0;
		while ((n = read(T.wake[0], buf, sizeof(buf))) > 0)
			for (ssize_t i = 0; i < n; i++)
				winch |= buf[i] == 'w';
		if (winch)
			resize();
		if (p[0].revents & (POLLHUP | POLLERR | POLLNVAL))
			break; /* the terminal is gone */
		int ch, quit = 0;
		while (!quit && (ch = getch()) != ERR)
			if (ch != KEY_RESIZE)
				quit = key(&s, ch);
		if (quit)
			break;
	}
	teardown(&s);
	int left = gpr_cli_top_act_leave();
	gpr_cli_top_reader_stop(s.reader);
	if (profile) /* after the reader's own lines (its rounds) */
		fprintf(stderr,
			"top-profile draws %zu cpu_ms %.3f\n"
			"top-profile draw_ms%s\n%s",
			n_draws, (cpu_seconds() - cpu0) * 1e3,
			gpr__buf_str(&draws), gpr__buf_str(&s.acts));
	gpr__buf_free(&draws);
	gpr__buf_free(&s.acts);
	gpr_cli_top_screen_free(&screen);
	gpr_cli_top_reading_free(s.reading);
	free(s.reading);
	gpr__buf_free(&s.ui.page);
	gpr__buf_free(&s.stderr_all);
	for (int i = 0; i < 2 && !left; i++) /* else the action writes */
		if (T.wake[i] >= 0)
			close(T.wake[i]);
	return GPR_CLI_OK;
}

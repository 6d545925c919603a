/* fencecheck's clock shim: an LD_PRELOAD library that moves a process's clock as its control file
 * says, for the daemons libfaketime cannot start (harness/nodeside/clock.py says who and why).
 *
 * It reads libfaketime's control file, in the subset fencecheck writes (harness/nodeside/clock.py,
 * control_text, with FAKETIME_FMT=%s), from the same environment variables, so that the harness
 * starts, moves and reads both alike:
 *
 *   "+D x1"  the clock reads real time plus D seconds (signed), whenever it is read;
 *   "@T xR"  at the first clock read after the file changed the clock reads T (seconds since the
 *            epoch) and runs at R from there;
 *   "+D xR"  (R other than 1) real time plus D, at rate R since the process's first clock read,
 *            as libfaketime counts it;
 *   a missing, empty or unreadable file: the real clock.
 *
 * FAKETIME_TIMESTAMP_FILE names the file, read at every clock call (libfaketime's
 * FAKETIME_NO_CACHE=1, the only way fencecheck runs it). FAKETIME_DONT_FAKE_MONOTONIC=1 moves the
 * wall clock alone (CLOCK_REALTIME and its coarse form, gettimeofday, time); otherwise the
 * monotonic and boot clocks move by the same offset.
 *
 * Why not libfaketime: it finds the real clock functions with dlsym, which allocates; in a process
 * whose malloc reads the clock at its start (jemalloc, linked by Debian's redis-server) that
 * recursion never ends (wolfcw/libfaketime#130). This shim reads the real clocks and its file
 * through raw system calls, allocates nothing and takes no lock but its own spin lock, so nothing
 * it calls can come back into it. The cost is a system call (not the vDSO) per clock read, plus
 * three for the file.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define TEXT_MAX 128
#define PATH_MAX_LENGTH 4096

enum form { REAL, OFFSET, ANCHORED };

static struct {
    volatile int busy;      /* the spin lock over what follows */
    int started;            /* the environment has been read */
    int faked;              /* a control file is named: read it */
    char path[PATH_MAX_LENGTH]; /* its path, copied: a process may overwrite its environment's
                               strings (Redis writes its title over them, setproctitle) */
    int wall_only;
    double first_real;      /* the real wall clock at the first clock read */
    char text[TEXT_MAX];    /* the file's text as last read */
    int length;
    enum form form;
    double offset;          /* OFFSET: seconds ahead at the first read */
    double rate;
    double anchor_real;     /* ANCHORED: the real and the fake clock at the first read after */
    double anchor_fake;     /*           the file changed */
} state = {.rate = 1.0};

static int real_clock(clockid_t id, struct timespec *ts) {
    return (int)syscall(SYS_clock_gettime, id, ts);
}

static double seconds(const struct timespec *ts) {
    return (double)ts->tv_sec + (double)ts->tv_nsec / 1e9;
}

/* A decimal number at *at ("-12.5"), moving *at past it; 0 when there is none. Written out (not
 * strtod) so that no locale or allocation is involved. */
static double number(const char **at) {
    const char *p = *at;
    double sign = 1.0, value = 0.0, scale = 1.0;
    if (*p == '+' || *p == '-') {
        sign = *p == '-' ? -1.0 : 1.0;
        p++;
    }
    for (; *p >= '0' && *p <= '9'; p++) value = value * 10.0 + (*p - '0');
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            scale /= 10.0;
            value += (*p - '0') * scale;
        }
    }
    *at = p;
    return sign * value;
}

/* Parse the file's text (state.text) into the state, anchored at real time ``now``. */
static void parse(double now) {
    const char *p = state.text;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    enum form form = REAL;
    double value = 0.0, rate = 1.0;
    if (*p == '@') {
        p++;
        form = ANCHORED;
        value = number(&p);
    } else if (*p == '+' || *p == '-') {
        form = OFFSET;
        value = number(&p);
    }
    while (*p == ' ' || *p == '\t') p++;
    if (*p == 'x') {
        p++;
        rate = number(&p);
        if (!(rate > 0.0)) rate = 1.0;
    }
    state.form = form;
    state.rate = rate;
    state.offset = value;
    state.anchor_real = now;
    state.anchor_fake = value;
}

/* Read the control file; when its text changed, take the new one from the real time now. That
 * time is read after the file, not taken from the caller: a caller preempted between reading the
 * real clock and reading the file (on a loaded machine, tens of ms) may have read it before the
 * writer replaced the file, and an "@T xR" anchored there would run ahead of its schedule by R
 * times that wait (a Redis 2x window read 114 ms ahead; harness/nodeside/clock.py). */
static void refresh(void) {
    char text[TEXT_MAX];
    long fd = syscall(SYS_openat, AT_FDCWD, state.path, O_RDONLY | O_CLOEXEC);
    long length = 0;
    if (fd >= 0) {
        length = syscall(SYS_read, fd, text, sizeof text - 1);
        syscall(SYS_close, fd);
    }
    if (length < 0) length = 0;
    text[length] = '\0';
    if (length == state.length && memcmp(text, state.text, (size_t)length) == 0) return;
    memcpy(state.text, text, (size_t)length + 1);
    state.length = (int)length;
    struct timespec fresh;
    real_clock(CLOCK_REALTIME, &fresh);
    parse(seconds(&fresh));
}

/* How far the fake wall clock is ahead of the real one at real wall time ``now``. */
static double offset_at(double now) {
    switch (state.form) {
    case OFFSET:
        if (state.rate == 1.0) return state.offset;
        return state.offset + (now - state.first_real) * (state.rate - 1.0);
    case ANCHORED:
        /* A caller's real time read before the anchor reads the anchored value itself. */
        return state.anchor_fake + (now > state.anchor_real ? now - state.anchor_real : 0.0) *
            state.rate - now;
    default:
        return 0.0;
    }
}

#define ABANDONED_AFTER 1000000

static void lock(void) {
    /* Held for one small file read: a waiter yields rather than spin out its time slice. A lock
     * held that long was inherited held by a child forked meanwhile (its holder is not in the
     * child): take it over. */
    for (long tries = 0; __atomic_test_and_set(&state.busy, __ATOMIC_ACQUIRE); tries++) {
        if (tries >= ABANDONED_AFTER) return;
        syscall(SYS_sched_yield);
    }
}

static void unlock(void) { __atomic_clear(&state.busy, __ATOMIC_RELEASE); }

/* The offset to add now (0: leave the clock alone), given the real wall clock ``now``. */
static double current_offset(double now) {
    lock();
    if (!state.started) {
        state.started = 1;
        state.first_real = now;
        const char *path = getenv("FAKETIME_TIMESTAMP_FILE");
        if (path && *path && strlen(path) < sizeof state.path) {
            memcpy(state.path, path, strlen(path) + 1);
            state.faked = 1;
        }
        const char *wall = getenv("FAKETIME_DONT_FAKE_MONOTONIC");
        state.wall_only = wall && *wall && strcmp(wall, "0") != 0;
    }
    double offset = 0.0;
    if (state.faked) {
        refresh();
        offset = offset_at(now);
    }
    unlock();
    return offset;
}

/* Move ``ts`` by ``by`` seconds, whole seconds and nanoseconds apart: a double holding the
 * whole clock reading would keep only a fraction of a microsecond. */
static void shift(struct timespec *ts, double by) {
    double whole = (double)(long long)by;
    if (whole > by) whole -= 1.0;
    long nanos = ts->tv_nsec + (long)((by - whole) * 1e9);
    ts->tv_sec += (time_t)whole + nanos / 1000000000L;
    ts->tv_nsec = nanos % 1000000000L;
}

static int moves(clockid_t id) {
    switch (id) {
    case CLOCK_REALTIME:
    case CLOCK_REALTIME_COARSE:
        return 1;
    case CLOCK_MONOTONIC:
    case CLOCK_MONOTONIC_RAW:
    case CLOCK_MONOTONIC_COARSE:
    case CLOCK_BOOTTIME:
        return 2;
    default:
        return 0;
    }
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    int which = moves(id);
    /* Read without the lock: set once, at the first call, which is a wall clock's or not. */
    if (!which || (which == 2 && state.started && state.wall_only)) return real_clock(id, ts);
    struct timespec wall;
    if (real_clock(CLOCK_REALTIME, &wall) != 0) return -1;
    double offset = current_offset(seconds(&wall));
    if (which == 2 && state.wall_only) offset = 0.0;
    if (id == CLOCK_REALTIME) {
        *ts = wall;
    } else if (real_clock(id, ts) != 0) {
        return -1;
    }
    if (offset != 0.0) shift(ts, offset);
    return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict zone) {
    (void)zone;
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) return -1;
    tv->tv_sec = now.tv_sec;
    tv->tv_usec = now.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *out) {
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) return (time_t)-1;
    if (out) *out = now.tv_sec;
    return now.tv_sec;
}

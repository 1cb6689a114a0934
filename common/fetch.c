// fetch.c - the listed files of a directory read at once (fsat.h): one
// io_uring(7) submission opens, reads and closes every one of them, where a
// file by the usual calls costs three system calls of its own.
//
// Each file takes a chain of three requests: an open into a slot of the
// ring's own file table (a direct descriptor, never in the process's), a
// read of that slot into the file's window, a close of the slot. The open
// is linked to the read (a failed open cancels the rest), the read
// hard-linked to the close (a short read, a file's end, still closes). A
// file whose open or read failed, or whose read filled its window (it may
// go on), is simply not fetched: the reader opens it as ever, and reports
// what goes wrong as ever. No io_uring (an old kernel, a seccomp filter
// that refuses it, ACPSNAP_IO_URING=0): nothing is fetched.
#include "acpsnap.h"
#include "fsat.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__linux__) && defined(__has_include)
#if __has_include(<linux/io_uring.h>)
#include <linux/io_uring.h>
#endif
#endif

#if defined(IORING_RSRC_REGISTER_SPARSE) && defined(__NR_io_uring_setup)

enum { FETCH_MAX = AS_FETCH_MAX, FETCH_WINDOW = AS_FETCH_WINDOW, OP_OPEN = 0, OP_READ, OP_CLOSE };

static struct {
    int tried;                  // this process has made its ring, or failed to; a fork's child has not
    int fd;                     // the ring; -1: none
    unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
    void *ring_map, *sqe_map;
    size_t ring_len, sqe_len;
    char *win;                  // FETCH_MAX windows
    struct { int dfd; const char *name; long len; } f[FETCH_MAX];   // len -1: not fetched
    size_t n;
    int closing;                // a directory the next submission closes; -1: none
} R = {.fd = -1, .closing = -1};

static void ring_drop(void)
{
    if (R.ring_map) munmap(R.ring_map, R.ring_len);
    if (R.sqe_map) munmap(R.sqe_map, R.sqe_len);
    if (R.fd >= 0) close(R.fd);
    R.ring_map = R.sqe_map = NULL;
    R.fd = -1;
}

static int ring_make(void)
{
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    int fd = (int)syscall(__NR_io_uring_setup, 4 * FETCH_MAX, &p);   // (close-on-exec)
    if (fd < 0) return -1;
    R.fd = fd;
    if (!(p.features & IORING_FEAT_SINGLE_MMAP) || p.cq_entries < 3 * FETCH_MAX) return -1;
    size_t sq = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    R.ring_len = sq > cq ? sq : cq;
    R.sqe_len = p.sq_entries * sizeof(struct io_uring_sqe);
    void *m = mmap(NULL, R.ring_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    if (m == MAP_FAILED) return -1;
    R.ring_map = m;
    void *s = mmap(NULL, R.sqe_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    if (s == MAP_FAILED) return -1;
    R.sqe_map = R.sqes = s;
    char *b = m;
    R.sq_tail = (unsigned *)(b + p.sq_off.tail);
    R.sq_mask = (unsigned *)(b + p.sq_off.ring_mask);
    R.sq_array = (unsigned *)(b + p.sq_off.array);
    R.cq_head = (unsigned *)(b + p.cq_off.head);
    R.cq_tail = (unsigned *)(b + p.cq_off.tail);
    R.cq_mask = (unsigned *)(b + p.cq_off.ring_mask);
    R.cqes = (struct io_uring_cqe *)(b + p.cq_off.cqes);
    struct io_uring_rsrc_register rr;
    memset(&rr, 0, sizeof rr);
    rr.nr = FETCH_MAX;
    rr.flags = IORING_RSRC_REGISTER_SPARSE;
    if (syscall(__NR_io_uring_register, fd, IORING_REGISTER_FILES2, &rr, sizeof rr) < 0) return -1;
    if (!R.win) {
        void *w = mmap(NULL, (size_t)FETCH_MAX * FETCH_WINDOW, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (w == MAP_FAILED) return -1;
        R.win = w;
    }
    return 0;
}

// In a fork's child: the parent's ring and directory are the parent's, so
// this copy of them is let go, untouched, and the child makes its own.
static void forked(void)
{
    ring_drop();
    if (R.closing >= 0) close(R.closing), R.closing = -1;
    R.n = 0, R.tried = 0;
}

// The ring of this process, made on first use: 0, or -1 when there is none.
static int ring(void)
{
    if (R.tried) return R.fd >= 0 ? 0 : -1;
    static int hooked;
    if (!hooked && pthread_atfork(NULL, NULL, forked) != 0) return -1;
    hooked = R.tried = 1;
    const char *off = getenv("ACPSNAP_IO_URING");
    if (off && !strcmp(off, "0")) return -1;
    if (ring_make() < 0) { ring_drop(); return -1; }
    return 0;
}

// Request op at the ring's tail for file i (its slot in the ring's file
// table; FETCH_MAX: the directory closed on the way). An open goes into
// slot i; a close with fd -1 closes slot i, else descriptor fd.
static void put(unsigned *tail, unsigned op, int fd, const void *addr, unsigned len, unsigned char flags, size_t i)
{
    unsigned k = *tail & *R.sq_mask;
    struct io_uring_sqe *q = &R.sqes[k];
    memset(q, 0, sizeof *q);
    q->opcode = (unsigned char)op;
    q->flags = flags;
    q->fd = fd;
    q->addr = (uint64_t)(uintptr_t)addr;
    q->len = len;
    q->user_data = (uint64_t)i << 2 | (op == IORING_OP_OPENAT ? OP_OPEN : op == IORING_OP_READ ? OP_READ : OP_CLOSE);
    if (op == IORING_OP_OPENAT) q->open_flags = O_RDONLY;   // (close-on-exec is not for a direct descriptor)
    if (op == IORING_OP_OPENAT || (op == IORING_OP_CLOSE && fd < 0)) q->file_index = (unsigned)i + 1;
    if (op == IORING_OP_CLOSE && fd < 0) q->fd = 0;
    R.sq_array[k] = k;
    ++*tail;
}

void as_fetch(int dfd, char *const *names, size_t n)
{
    R.n = 0;
    if (!n || ring() < 0) return;
    if (n > FETCH_MAX) n = FETCH_MAX;
    unsigned tail = *R.sq_tail;
    for (size_t i = 0; i < n; i++) {
        R.f[i].dfd = dfd, R.f[i].name = names[i], R.f[i].len = -1;
        put(&tail, IORING_OP_OPENAT, dfd, names[i], 0, IOSQE_IO_LINK, i);
        put(&tail, IORING_OP_READ, (int)i, R.win + i * (size_t)FETCH_WINDOW, FETCH_WINDOW, IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK, i);
        put(&tail, IORING_OP_CLOSE, -1, NULL, 0, 0, i);
    }
    unsigned todo = 3 * (unsigned)n;
    if (R.closing >= 0) {   // the last directory, closed on the way
        put(&tail, IORING_OP_CLOSE, R.closing, NULL, 0, 0, FETCH_MAX);
        R.closing = -1;
        todo++;
    }
    __atomic_store_n(R.sq_tail, tail, __ATOMIC_RELEASE);
    unsigned left = todo, ok[FETCH_MAX + 1] = {0};
    while (left) {   // submit all, then wait for every completion
        long r = syscall(__NR_io_uring_enter, R.fd, todo, left, IORING_ENTER_GETEVENTS, NULL, 0);
        if (r < 0 && errno != EINTR) break;
        if (r > 0) todo -= (unsigned)r;
        unsigned head = *R.cq_head, end = __atomic_load_n(R.cq_tail, __ATOMIC_ACQUIRE);
        for (; head != end; head++, left--) {
            const struct io_uring_cqe *c = &R.cqes[head & *R.cq_mask];
            size_t i = (size_t)(c->user_data >> 2);
            unsigned op = (unsigned)(c->user_data & 3);
            if (op == OP_OPEN) ok[i] = c->res >= 0;
            else if (op == OP_READ && c->res >= 0 && c->res < FETCH_WINDOW) {
                R.f[i].len = c->res;
                R.win[i * (size_t)FETCH_WINDOW + (size_t)c->res] = 0;
            }
        }
        __atomic_store_n(R.cq_head, head, __ATOMIC_RELEASE);
    }
    if (left) {   // the ring failed us midway: none of this is trusted, and no more rings
        ring_drop();
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (!ok[i]) R.f[i].len = -1;
    R.n = n;
}

int as_fetched(int dfd, const char *name, const char **p, size_t *len)
{
    for (size_t i = 0; i < R.n; i++)
        if (R.f[i].len >= 0 && R.f[i].dfd == dfd && !strcmp(R.f[i].name, name)) {
            *p = R.win + i * (size_t)FETCH_WINDOW;
            *len = (size_t)R.f[i].len;
            return 1;
        }
    return 0;
}

void as_fetch_drop(void) { R.n = 0; }

void as_fetch_close(int fd)
{
    if (R.closing >= 0) close(R.closing);
    R.closing = -1;
    if (R.tried && R.fd >= 0) R.closing = fd;
    else close(fd);
}

#else   // no io_uring here: nothing is fetched

void as_fetch(int dfd, char *const *names, size_t n) { (void)dfd, (void)names, (void)n; }
int as_fetched(int dfd, const char *name, const char **p, size_t *len) { (void)dfd, (void)name, (void)p, (void)len; return 0; }
void as_fetch_drop(void) {}
void as_fetch_close(int fd) { close(fd); }

#endif

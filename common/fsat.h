// fsat.h - reading the files of a tree relative to an open directory
// (openat(2)): one open, read(2) into a window reused from file to file, no
// stdio, no path resolution from the root for every file. Shared by fixture-guard and
// the lint (lint.c).
//
// To be included after acpsnap.h.
#ifndef ACPSNAP_FSAT_H
#define ACPSNAP_FSAT_H

#include "acpsnap.h"

// A file read a line at a time through a window (512 KiB, grown only for a
// longer line), so memory is bounded by the longest line whatever the
// file's size; a file that fits the window is read by one read(2) and
// rewound without another. Lines are handed out as they are: their bytes
// without the LF (a NUL or a CR is just a byte), has_lf 0 for an
// unterminated last line. Keep one as_lines for many files: its window is
// reused.
typedef struct {
    int fd;
    const char *path;             // for messages
    as_buf b;                     // the window: [pos, b.n) not yet handed out
    as_buf own;                   // the reader's window while b shows a fetched file
    int lent;                     // b shows a fetched file's bytes (as_fetch), until the close
    size_t pos;
    int eof;                      // the file's end is in the window
    int whole;                    // the window starts at the file's start
    int reg;                      // a regular file: a short read is its end
} as_lines;

// Opens name beneath directory fd dfd (AT_FDCWD: the current directory;
// symbolic links followed, as open(2) does). 0, or -1 with errno.
int as_lines_open_at(as_lines *r, int dfd, const char *name, const char *path);
// The same for a file the caller knows is a regular file (it listed it so):
// a read(2) that returns less than it asked for is the file's end, as POSIX
// has it for a regular file (a signal handler could cut a read short, and
// these tools install none), so a file that fits the window takes one
// read, not two.
int as_lines_open_reg(as_lines *r, int dfd, const char *name, const char *path);
// The next line: 1 and *line, *len, *has_lf (valid until the next call),
// or 0 at the end. Dies ("unable to read <path>") on a read error.
int as_lines_next(as_lines *r, const char **line, size_t *len, int *has_lf);
// The first bytes of the file (at least min of them when it has so many):
// their count, *p pointing at them. Call it before as_lines_next.
size_t as_lines_head(as_lines *r, size_t min, const char **p);
// Back to the first line.
void as_lines_rewind(as_lines *r);
// Closes the file; the window stays for the next one.
void as_lines_close(as_lines *r);

// The regular files names[0, n) of directory dfd (a caller's listing) read
// ahead, all at once (fetch.c: one io_uring(7) submission where the kernel
// offers it, else nothing). Until as_fetch_drop, as_lines_open_at and
// as_read_raw_at hand out a fetched file's bytes without a system call;
// a file not fetched (AS_FETCH_WINDOW bytes or more, unreadable, past the
// first AS_FETCH_MAX) is read as ever. names and dfd must outlive the
// fetch: drop it before either goes. ACPSNAP_IO_URING=0 in the environment
// turns fetching off.
enum { AS_FETCH_MAX = 16, AS_FETCH_WINDOW = 128 * 1024 };
void as_fetch(int dfd, char *const *names, size_t n);
// 1 and the bytes of file name of directory dfd when they were fetched whole
// (a NUL after them, as in an as_buf).
int as_fetched(int dfd, const char *name, const char **p, size_t *len);
void as_fetch_drop(void);
// Closes directory fd: by the next fetch's submission where there is a
// ring (so until then it stays open), else at once.
void as_fetch_close(int fd);

// Calls fn(ctx, name, type) for each entry of the directory open as dfd
// but "." and ".." (type a DT_* of dirent.h, DT_UNKNOWN when the file
// system does not tell), reading it with getdents64(2): no DIR, no
// allocation. 0, or -1 with errno.
int as_dir_each(int dfd, void (*fn)(void *ctx, const char *name, unsigned char type), void *ctx);

#endif

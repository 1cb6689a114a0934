// confine.h - confinement of paths that come from scenario data.
//
// Scenario data (tables, input.json, overrides, provider scripts, logs,
// workspace seeds) arrives in strangers' pull requests, so every path it
// names is untrusted. One rule, used by every tool, the agent and the
// pipelines (acpsnap-scenarios(5), TRUST MODEL):
//   - it is relative, non-empty, at most AS_PATH_MAX bytes, with no NUL or
//     control character and no "." or ".." component (so it cannot climb);
//   - it is resolved beneath its root directory without following any
//     symbolic link, at any component (openat2 RESOLVE_BENEATH |
//     RESOLVE_NO_SYMLINKS where the kernel has it, an O_NOFOLLOW walk
//     otherwise);
//   - a file that should not exist yet is created with O_CREAT|O_EXCL.
#ifndef ACPSNAP_CONFINE_H
#define ACPSNAP_CONFINE_H

#include <sys/types.h>

#define AS_PATH_MAX 1024
#define AS_NAME_MAX 128

// 0 when rel obeys the rule above; else -1 and *why (static text) says why.
int as_rel_check(const char *rel, const char **why);
// 0 when name is a valid scenario name: 1 to AS_NAME_MAX bytes, no '/', no
// control character, not starting with '.' or '-'; else -1 and *why.
int as_name_check(const char *name, const char **why);

// Opens rel beneath the directory rootfd (AT_FDCWD: the current directory)
// with open(2) flags and mode; no symlink is followed, nothing outside the
// root is reached. Returns an fd, or -1 with errno: EINVAL (rel breaks the
// rule), ELOOP (a symlink on the way), EXDEV (an escape), or open's own.
int as_open_beneath(int rootfd, const char *rel, int flags, mode_t mode);
// Why a confined open failed, for messages: ELOOP "a symbolic link on the
// way (links are not followed)", EXDEV "it leaves its root", EINVAL "not a
// relative path beneath its root", else strerror(err).
const char *as_beneath_strerror(int err);
// Like as_open_beneath on "root/rel" with root a path: opens root itself
// (following links in root, which the caller chose), then rel beneath it.
int as_open_under(const char *root, const char *rel, int flags, mode_t mode);
// Creates the directories of rel beneath rootfd (mkdir -p, no link
// followed); the last component too when last is 1. 0, or -1 with errno.
int as_mkdirs_beneath(int rootfd, const char *rel, int last, mode_t mode);

// Copies the tree src into the existing directory dst (both caller-chosen):
// directories and regular files (mode bits kept, umask applied); a symbolic
// link is copied as a link only when its target is relative and stays inside
// src, and refused otherwise; anything else (fifo, device, socket) is
// refused. Returns 0, or -1 with *bad (malloc'd, caller frees) naming the
// refused entry relative to src and errno set (ELOOP for a link).
int as_copy_tree(const char *src, const char *dst, char **bad);

#endif

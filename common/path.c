// path.c - file names: joining, what a name stands for, directory arguments.
#include "acpsnap.h"
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *as_path_join(const char *dir, const char *name)
{
    size_t na = strlen(dir), nb = strlen(name);
    char *p = as_xmalloc(na + nb + 2);
    memcpy(p, dir, na);
    p[na] = '/';
    memcpy(p + na + 1, name, nb + 1);
    return p;
}

char *as_path_join3(const char *dir, const char *name, const char *file)
{
    char *d = as_path_join(dir, name), *p = as_path_join(d, file);
    free(d);
    return p;
}

int as_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int as_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *as_dir_arg(const char *arg)
{
    char *dir = as_xstrdup(arg);
    for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/';) dir[--n] = 0;
    struct stat st;
    if (stat(dir, &st) < 0) as_die_sys("open directory %s", dir);
    if (!S_ISDIR(st.st_mode)) as_die_at(dir, 0, 0, "not a directory");
    return dir;
}

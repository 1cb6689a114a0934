// harvest.c - the session logs under the sessions root: read as they grow
// (raw or zstd), listed primary first, copied into the output directory,
// and run.json, the run's context for scrub.
#include "drive.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

// ---------------------------------------------------------------- reading
static void decompress(const as_buf *raw, as_buf *out)
{
    ZSTD_DStream *z = ZSTD_createDStream();
    ZSTD_initDStream(z);
    ZSTD_inBuffer in = { raw->p, raw->n, 0 };
    while (in.pos < in.size) {
        as_buf_grow(out, 131072);
        ZSTD_outBuffer o = { out->p + out->n, out->cap - out->n - 1, 0 };
        size_t rc = ZSTD_decompressStream(z, &o, &in);
        out->n += o.pos;
        out->p[out->n] = 0;
        if (ZSTD_isError(rc)) break;
        if (o.pos == 0 && in.pos < in.size && rc != 0 && o.size > 0 && in.pos == in.size) break;
    }
    ZSTD_freeDStream(z);
}

// Reads a session log that may still be growing: raw or zstd, keeping only
// complete lines (a torn tail or an unfinished frame is "not yet").
void read_growing(const char *path, as_buf *out)
{
    as_buf_reset(out);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return;
    as_buf raw = {0};
    char tmp[65536];
    for (ssize_t k; (k = read(fd, tmp, sizeof tmp)) > 0;) as_buf_put(&raw, tmp, (size_t)k);
    close(fd);
    static const unsigned char MAGIC[4] = { 0x28, 0xb5, 0x2f, 0xfd };
    if (raw.n >= 4 && !memcmp(raw.p, MAGIC, 4)) decompress(&raw, out);
    else as_buf_put(out, raw.p ? raw.p : "", raw.n);
    as_buf_free(&raw);
    while (out->n && out->p[out->n - 1] != '\n') out->n--;
    if (out->p) out->p[out->n] = 0;
}

// ---------------------------------------------------------------- listing
void loglist_free(loglist *l)
{
    for (size_t i = 0; i < l->n; i++) { free(l->v[i].path); free(l->v[i].rel); free(l->v[i].id); }
    free(l->v);
    memset(l, 0, sizeof *l);
}

// The regular files under root/rel that a harvest glob matches.
static void walk(const char *root, const char *rel, const profile *pf, loglist *l)
{
    char *dirp = rel[0] ? xasprintf("%s/%s", root, rel) : as_xstrdup(root);
    DIR *d = opendir(dirp);
    if (!d) { free(dirp); return; }
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *r = rel[0] ? xasprintf("%s/%s", rel, e->d_name) : as_xstrdup(e->d_name);
        char *full = xasprintf("%s/%s", root, r);
        struct stat st;
        if (!lstat(full, &st) && S_ISDIR(st.st_mode)) {
            walk(root, r, pf, l);
        } else if (!lstat(full, &st) && S_ISREG(st.st_mode)) {
            for (size_t i = 0; i < pf->nharvest; i++)
                if (!fnmatch(pf->harvest[i], r, 0)) {
                    l->v = as_xrealloc(l->v, (l->n + 1) * sizeof *l->v);
                    l->v[l->n++] = (logfile){ .path = full, .rel = r };
                    full = r = NULL;
                    break;
                }
        }
        free(full); free(r);
    }
    closedir(d);
    free(dirp);
}

static int log_order(const void *a, const void *b)
{
    const logfile *x = a, *y = b;
    if (x->child != y->child) return x->child - y->child;
    if (x->created != y->created) return x->created < y->created ? -1 : 1;
    return strcmp(x->id ? x->id : "", y->id ? y->id : "");
}

// 1 when the log's first line is a readable session header: its id,
// createdAt and parenthood into f.
static int read_header(logfile *f, as_json *j, as_buf *scratch)
{
    read_growing(f->path, scratch);
    char *nl = scratch->p ? memchr(scratch->p, '\n', scratch->n) : NULL;
    if (!nl || as_json_parse(j, scratch->p, (size_t)(nl - scratch->p)) || j->t[0].type != AS_JOBJ) return 0;
    int ty = as_json_get(j, 0, "type");
    if (ty < 0 || !as_json_streq(j, ty, "session")) return 0;
    int id = as_json_get(j, 0, "id"), ca = as_json_get(j, 0, "createdAt");
    as_buf s = {0};
    if (id >= 0 && j->t[id].type == AS_JSTR) as_json_str(j, id, &s);
    f->id = s.p ? s.p : as_xstrdup("");
    if (ca >= 0) as_json_int(j, ca, &f->created);
    f->child = as_json_get(j, 0, "parentSession") >= 0;
    return 1;
}

// Lists the logs under root with a readable header, primary first, then
// children by createdAt (then id), as the reference harness orders them.
void list_logs(const char *root, const profile *pf, loglist *l, as_buf *scratch)
{
    loglist all = {0};
    walk(root, "", pf, &all);
    as_json j = {0};
    for (size_t i = 0; i < all.n; i++) {
        logfile *f = &all.v[i];
        if (!read_header(f, &j, scratch)) continue;
        l->v = as_xrealloc(l->v, (l->n + 1) * sizeof *l->v);
        l->v[l->n++] = *f;
        memset(f, 0, sizeof *f);
    }
    as_json_free(&j);
    loglist_free(&all);
    if (l->n > 1) qsort(l->v, l->n, sizeof *l->v, log_order);
}

// ---------------------------------------------------------------- harvest
// Copies the logs (plain text) into the output directory: session.jsonl,
// session.1.jsonl… Returns their file names (caller frees).
static char **copy_logs(const run *r, const loglist *l)
{
    as_buf text = {0};
    char **files = as_xmalloc((l->n + 1) * sizeof *files);
    for (size_t i = 0; i < l->n; i++) {
        files[i] = i ? xasprintf("session.%zu.jsonl", i) : as_xstrdup("session.jsonl");
        char *dst = xasprintf("%s/%s", r->outdir, files[i]);
        read_growing(l->v[i].path, &text);
        write_plain(dst, text.p ? text.p : "", text.n);
        free(dst);
    }
    as_buf_free(&text);
    return files;
}

static void put_str(as_buf *o, const char *s) { as_jstr_write(o, s, strlen(s)); }

// "cwd":…,"cwdAliases":[…]
static void put_cwd(as_buf *o, const run *r)
{
    as_buf_puts(o, "\"cwd\":");
    put_str(o, r->cwd);
    as_buf_puts(o, ",\"cwdAliases\":[");
    put_str(o, r->cwd_real);
    as_buf_putc(o, ']');
}

// "sessionLogs":[…],"normalizeContext":{"sessionIds":[…],"cwd":…,"cwdAliases":[…]}
static void put_logs(as_buf *o, const run *r, const loglist *l, char **files)
{
    as_buf_puts(o, "\"sessionLogs\":[");
    for (size_t i = 0; i < l->n; i++) {
        as_buf_puts(o, i ? ",{\"id\":" : "{\"id\":");
        put_str(o, l->v[i].id);
        as_buf_puts(o, ",\"persistedPath\":");
        put_str(o, l->v[i].rel);
        as_buf_puts(o, ",\"file\":");
        put_str(o, files[i]);
        as_buf_puts(o, "}");
    }
    as_buf_puts(o, "],\"normalizeContext\":{\"sessionIds\":[");
    int first = 1;
    if (r->session_id) { put_str(o, r->session_id); first = 0; }
    for (size_t i = 0; i < l->n; i++) { if (!first) as_buf_puts(o, ","); first = 0; put_str(o, l->v[i].id); }
    as_buf_puts(o, "],");
    put_cwd(o, r);
    as_buf_putc(o, '}');
}

// "timings":{"prepare":…,"boot":…,"steps":[…],"exit":…,"harvest":…} in ms;
// a phase that did not run is left out.
static void put_timings(as_buf *o, const run *r)
{
    const char *sep = "";
    as_buf_puts(o, ",\"timings\":{");
    if (r->t_prepare >= 0) { as_buf_printf(o, "\"prepare\":%ld", r->t_prepare); sep = ","; }
    if (r->t_boot >= 0) { as_buf_printf(o, "%s\"boot\":%ld", sep, r->t_boot); sep = ","; }
    as_buf_printf(o, "%s\"steps\":[", sep);
    for (size_t i = 0; i < r->nt_steps; i++) as_buf_printf(o, "%s%ld", i ? "," : "", r->t_steps[i]);
    as_buf_putc(o, ']');
    if (r->t_exit >= 0) as_buf_printf(o, ",\"exit\":%ld", r->t_exit);
    if (r->t_harvest >= 0) as_buf_printf(o, ",\"harvest\":%ld", r->t_harvest);
    as_buf_putc(o, '}');
}

static void write_run_json(const run *r, const loglist *l, char **files)
{
    as_buf o = {0};
    as_buf_puts(&o, "{\"scenario\":");
    put_str(&o, r->name);
    as_buf_puts(&o, ",\"mode\":");
    put_str(&o, r->record ? "record" : "replay");
    as_buf_putc(&o, ',');
    put_cwd(&o, r);
    if (r->session_id) { as_buf_puts(&o, ",\"sessionId\":"); put_str(&o, r->session_id); }
    as_buf_putc(&o, ',');
    put_logs(&o, r, l, files);
    as_buf_printf(&o, ",\"exitCode\":%d,\"frames\":%ld",
                  r->exited && WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1, r->frames);
    put_timings(&o, r);
    as_buf_puts(&o, "}\n");
    char *rp = xasprintf("%s/run.json", r->outdir);
    write_plain(rp, o.p, o.n);
    free(rp);
    as_buf_free(&o);
}

// Copies harvested logs (plain text) into the output dir; writes run.json.
// A transcript-only scenario's logs, if the agent wrote any, are not taken.
void harvest(run *r)
{
    loglist l = {0};
    long t0 = as_now_ms();
    if (!r->transcript_only) list_logs(r->sessions_root, &r->pf, &l, &r->scratch);
    char **files = copy_logs(r, &l);
    r->t_harvest = as_now_ms() - t0;
    write_run_json(r, &l, files);
    for (size_t i = 0; i < l.n; i++) free(files[i]);
    free(files);
    loglist_free(&l);
}

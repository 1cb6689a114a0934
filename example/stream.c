// stream.c - the chunk queue between a model adapter and the loop.
#include <stdlib.h>
#include <string.h>
#include "acpsnap.h"
#include "agent.h"

chunk *chunk_new(const char *json, size_t len)
{
    chunk *c = as_xmalloc(sizeof *c);
    as_buf b = {0};
    as_json_compact(json, len, &b);
    c->next = NULL;
    c->json = b.p;
    c->len = b.n;
    return c;
}

void chunk_free(chunk *c)
{
    if (!c) return;
    free(c->json);
    free(c);
}

void stream_push(stream *s, const char *json, size_t len)
{
    chunk *c = chunk_new(json, len);
    pthread_mutex_lock(&ag.mu);
    if (s->tail) s->tail->next = c; else s->head = c;
    s->tail = c;
    pthread_cond_broadcast(&ag.cv);
    pthread_mutex_unlock(&ag.mu);
}

void stream_end(stream *s, const char *err_msg, const char *err_code)
{
    pthread_mutex_lock(&ag.mu);
    if (!s->done) {
        if (err_msg) {
            s->done = 2;
            s->err_msg = as_xstrdup(err_msg);
            s->err_code = as_xstrdup(err_code ? err_code : "UNKNOWN");
        } else s->done = 1;
    }
    pthread_cond_broadcast(&ag.cv);
    pthread_mutex_unlock(&ag.mu);
}

chunk *stream_next(stream *s, const _Atomic int *cancel)
{
    chunk *c = NULL;
    pthread_mutex_lock(&ag.mu);
    for (;;) {
        // Chunks already delivered are consumed even after a cancel, so what
        // a cancelled turn records never depends on timing.
        if (s->head) {
            c = s->head;
            s->head = c->next;
            if (!s->head) s->tail = NULL;
            c->next = NULL;
            break;
        }
        if (s->done || *cancel) break;
        pthread_cond_wait(&ag.cv, &ag.mu);
    }
    pthread_mutex_unlock(&ag.mu);
    return c;
}

void stream_close(stream *s)
{
    if (!s) return;
    pthread_mutex_lock(&ag.mu);
    s->abandon = 1;
    pthread_cond_broadcast(&ag.cv);
    pthread_mutex_unlock(&ag.mu);
    if (s->has_thread) pthread_join(s->th, NULL);
    if (s->close) s->close(s);
    for (chunk *c = s->head, *n; c; c = n) { n = c->next; chunk_free(c); }
    free(s->err_msg);
    free(s->err_code);
    free(s);
}

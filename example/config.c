// config.c - settings: defaults < config file < snapshot overlay < env < command line.
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "acpsnap.h"
#include "agent.h"

static const char DEFAULT_SYSTEM[] =
    "You are a coding assistant working in {{cwd}}. You can run shell commands with "
    "the bash tool and read and write files with read_file and write_file. Keep "
    "answers brief and factual.";

static void setstr(char **dst, const char *v) { free(*dst); *dst = v ? as_xstrdup(v) : NULL; }

// Parses a non-negative decimal long; 0 on success.
static int parse_long(const char *v, long *out)
{
    char *end; errno = 0;
    if (!*v || !isdigit((unsigned char)*v)) return -1;
    long n = strtol(v, &end, 10);
    if (errno || *end) return -1;
    *out = n; return 0;
}

// Unescapes \n, \t and \\ in a config value (for system_prompt).
static char *unescape(const char *v)
{
    as_buf b = {0};
    for (const char *p = v; *p; p++) {
        if (*p == '\\' && p[1] == 'n') { as_buf_putc(&b, '\n'); p++; }
        else if (*p == '\\' && p[1] == 't') { as_buf_putc(&b, '\t'); p++; }
        else if (*p == '\\' && p[1] == '\\') { as_buf_putc(&b, '\\'); p++; }
        else as_buf_putc(&b, *p);
    }
    if (!b.p) as_buf_puts(&b, "");
    return b.p;
}

#define FIELD(type, c, off) ((type *)((char *)(c) + (off)))

// Settings that take one of a few words: the setting is the word's index.
static int apply_choice(config *c, const char *k, const char *v, const char **err)
{
    static const struct { const char *k; size_t off; const char *words[4]; const char *err; } keys[] = {
        {"mode", offsetof(config, replay), {"live", "replay"}, "mode must be live or replay"},
        {"persistence", offsetof(config, raw), {"zstd", "raw"}, "persistence must be zstd or raw"},
        {"sync", offsetof(config, nosync), {"fsync", "none"}, "sync must be fsync or none"},
        {"thinking", offsetof(config, thinking), {"disabled", "enabled"}, "thinking must be enabled or disabled"},
        {"permission", offsetof(config, permission), {"allow", "ask", "reject"},   // PERM_* order
         "permission must be allow, ask or reject"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strcmp(k, keys[i].k)) continue;
        *err = keys[i].err;
        for (int w = 0; keys[i].words[w]; w++)
            if (!strcmp(v, keys[i].words[w])) { *FIELD(int, c, keys[i].off) = w; *err = NULL; }
        return 1;
    }
    return 0;
}

// Settings that take a string as it is.
static int apply_string(config *c, const char *k, const char *v)
{
    static const struct { const char *k; size_t off; } keys[] = {
        {"replay_script", offsetof(config, replay_script)}, {"replay_override", offsetof(config, replay_override)},
        {"sessions_root", offsetof(config, sessions_root)}, {"spill_root", offsetof(config, spill_root)},
        {"base_url", offsetof(config, base_url)}, {"api_key", offsetof(config, api_key)},
        {"model", offsetof(config, model)}, {"provider", offsetof(config, provider)},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(k, keys[i].k)) { setstr(FIELD(char *, c, keys[i].off), v); return 1; }
    return 0;
}

// Settings that take an integer with a lower bound.
static int apply_number(config *c, const char *k, const char *v, const char **err)
{
    static const struct { const char *k; size_t off; long min; } keys[] = {
        {"max_tokens", offsetof(config, max_tokens), 0},
        {"max_steps", offsetof(config, max_steps), 1},
        {"bash_timeout_ms", offsetof(config, bash_timeout_ms), 1},
        {"output_cap", offsetof(config, output_cap), 1},
        {"context_budget", offsetof(config, context_budget), 0},
        {"request_timeout_ms", offsetof(config, request_timeout_ms), 1},
        {"idle_timeout_ms", offsetof(config, idle_timeout_ms), 1},
    };
    long n;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (strcmp(k, keys[i].k)) continue;
        if (parse_long(v, &n) || n < keys[i].min)
            *err = keys[i].min ? "value must be a positive integer" : "value must be a non-negative integer";
        else
            *FIELD(long, c, keys[i].off) = n;
        return 1;
    }
    return 0;
}

// Applies key = value; returns NULL or a static error message.
static const char *apply(config *c, const char *k, const char *v)
{
    const char *err = NULL;
    if (apply_choice(c, k, v, &err) || apply_string(c, k, v) || apply_number(c, k, v, &err)) return err;
    if (strcmp(k, "system_prompt")) return "unknown key";
    free(c->system_prompt);
    c->system_prompt = unescape(v);
    return NULL;
}

// nofollow: the file may not be a symbolic link (the snapshot overlay, which
// sits in a snapshots tree beside the config the harness named).
static void load_file(config *c, const char *path, int nofollow)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
    if (!f) {
        if (nofollow && errno == ELOOP) as_die(AS_TROUBLE, "unable to open config %s: a symbolic link (not followed)", path);
        as_die(AS_TROUBLE, "unable to open config %s: %s", path, strerror(errno));
    }
    char *line = NULL; size_t cap = 0; ssize_t n; long lineno = 0;
    while ((n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (!*p || *p == '#') continue;
        char *eq = strchr(p, '=');
        if (!eq) { free(line); fclose(f); as_die_at(path, lineno, 0, "expected key = value"); }
        char *ke = eq;
        while (ke > p && (ke[-1] == ' ' || ke[-1] == '\t')) ke--;
        *ke = 0;
        char *v = eq + 1;
        while (*v == ' ' || *v == '\t') v++;
        char *ve = v + strlen(v);
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        *ve = 0;
        if (!*p) { free(line); fclose(f); as_die_at(path, lineno, 0, "missing key"); }
        const char *err = apply(c, p, v);
        if (err) {
            char key[64]; snprintf(key, sizeof key, "%s", p);
            free(line); fclose(f);
            as_die_at(path, lineno, 0, "%s: %s", key, err);
        }
    }
    free(line);
    fclose(f);
}

static void env_apply(config *c, const char *env, const char *key)
{
    const char *v = getenv(env);
    if (!v || !*v) return;
    const char *err = apply(c, key, v);
    if (err) as_die(AS_TROUBLE, "%s: %s", env, err);
}

void config_load(config *c, const char *path, const char *cli_replay)
{
    memset(c, 0, sizeof *c);
    const char *tmp = getenv("TMPDIR");
    as_buf spill = {0};
    as_buf_printf(&spill, "%s/acpsnap-agent-spill", tmp && *tmp ? tmp : "/tmp");
    c->spill_root = spill.p;
    c->sessions_root = as_xstrdup("./.sessions");
    c->base_url = as_xstrdup("https://api.deepseek.com");
    c->model = as_xstrdup("deepseek-v4-flash");
    c->provider = as_xstrdup("deepseek-official");
    c->system_prompt = as_xstrdup(DEFAULT_SYSTEM);
    c->thinking = 1;
    c->max_steps = 25;
    c->bash_timeout_ms = 60000;
    c->output_cap = 30000;
    c->request_timeout_ms = 600000;
    c->idle_timeout_ms = 120000;

    const char *snap = getenv("ACPSNAP_SNAPSHOT");
    if (snap && *snap && strcmp(snap, "replay") && strcmp(snap, "record") && strcmp(snap, "live"))
        as_die(AS_TROUBLE, "ACPSNAP_SNAPSHOT: must be replay, record or live");
    int snap_replay = snap && !strcmp(snap, "replay");

    if (!path) { const char *e = getenv("ACPSNAP_AGENT_CONFIG"); if (e && *e) path = e; }
    if (path) {
        load_file(c, path, 0);
        if (snap_replay) {
            // X.conf → X.snapshot.conf beside it
            as_buf ov = {0};
            size_t n = strlen(path);
            if (n > 5 && !strcmp(path + n - 5, ".conf")) {
                as_buf_put(&ov, path, n - 5);
                as_buf_puts(&ov, ".snapshot.conf");
            } else {
                as_buf_puts(&ov, path);
                as_buf_puts(&ov, ".snapshot");
            }
            struct stat st;
            if (lstat(ov.p, &st) == 0) load_file(c, ov.p, 1);
            as_buf_free(&ov);
        }
    }
    if (snap && *snap) c->replay = snap_replay;
    env_apply(c, "ACPSNAP_REPLAY_SCRIPT", "replay_script");
    env_apply(c, "ACPSNAP_REPLAY_OVERRIDE", "replay_override");
    env_apply(c, "ACPSNAP_SESSIONS_ROOT", "sessions_root");
    env_apply(c, "ACPSNAP_SPILL_ROOT", "spill_root");
    env_apply(c, "ACPSNAP_PERSISTENCE", "persistence");
    env_apply(c, "ACPSNAP_SYNC", "sync");
    env_apply(c, "ACPSNAP_PERMISSION", "permission");
    env_apply(c, "DEEPSEEK_BASE_URL", "base_url");
    env_apply(c, "DEEPSEEK_MODEL", "model");
    if (cli_replay) { c->replay = 1; setstr(&c->replay_script, cli_replay); }
    const char *crash = getenv("ACPSNAP_AGENT_CRASH_AT_BATCH");
    if (crash && *crash && parse_long(crash, &c->crash_at_batch))
        as_die(AS_TROUBLE, "ACPSNAP_AGENT_CRASH_AT_BATCH: value must be a non-negative integer");

    if (c->replay) {
        // Replay is hermetic: never a key, never .env, never the network.
        setstr(&c->api_key, NULL);
        if (!c->replay_script)
            as_die(AS_TROUBLE, "replay mode needs a replay script (replay_script, ACPSNAP_REPLAY_SCRIPT or --replay)");
        return;
    }
    env_apply(c, "DEEPSEEK_API_KEY", "api_key");
    if (!c->api_key) {
        FILE *f = fopen(".env", "r");
        if (f) {
            char *line = NULL; size_t cap = 0; ssize_t n;
            while ((n = getline(&line, &cap, f)) >= 0) {
                while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
                const char *p = line;
                if (!strncmp(p, "export ", 7)) p += 7;
                if (!strncmp(p, "DEEPSEEK_API_KEY=", 17)) {
                    p += 17;
                    size_t l = strlen(p);
                    if (l >= 2 && (p[0] == '"' || p[0] == '\'') && p[l - 1] == p[0]) {
                        char *k = as_xstrdup(p + 1); k[l - 2] = 0;
                        setstr(&c->api_key, k); free(k);
                    } else setstr(&c->api_key, p);
                }
            }
            free(line);
            fclose(f);
        }
    }
}

void config_print(const config *c, FILE *f)
{
    static const char *perm[] = {"allow", "ask", "reject"};
    fprintf(f, "mode = %s\n", c->replay ? "replay" : "live");
    if (c->replay_script) fprintf(f, "replay_script = %s\n", c->replay_script);
    if (c->replay_override) fprintf(f, "replay_override = %s\n", c->replay_override);
    fprintf(f, "sessions_root = %s\nspill_root = %s\npersistence = %s\nsync = %s\n",
            c->sessions_root, c->spill_root, c->raw ? "raw" : "zstd", c->nosync ? "none" : "fsync");
    fprintf(f, "base_url = %s\napi_key = %s\nmodel = %s\nprovider = %s\nthinking = %s\n",
            c->base_url, c->api_key ? "(set)" : "(none)", c->model, c->provider,
            c->thinking ? "enabled" : "disabled");
    fprintf(f, "max_tokens = %ld\nmax_steps = %ld\npermission = %s\nbash_timeout_ms = %ld\n"
               "output_cap = %ld\ncontext_budget = %ld\nrequest_timeout_ms = %ld\nidle_timeout_ms = %ld\n",
            c->max_tokens, c->max_steps, perm[c->permission], c->bash_timeout_ms, c->output_cap,
            c->context_budget, c->request_timeout_ms, c->idle_timeout_ms);
    as_buf b = {0};
    as_jstr_write(&b, c->system_prompt, strlen(c->system_prompt));
    fprintf(f, "system_prompt = %s\n", b.p);
    as_buf_free(&b);
}

void config_free(config *c)
{
    free(c->replay_script); free(c->replay_override); free(c->sessions_root);
    free(c->spill_root); free(c->base_url); free(c->api_key); free(c->model);
    free(c->provider); free(c->system_prompt);
    memset(c, 0, sizeof *c);
}

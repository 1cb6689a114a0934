// gen-session - writes a synthetic persisted session log shaped like real
// ones: mostly small chunk-delta events (reasoning, text with non-ASCII,
// tool-call arguments), request headers, some large tool outputs.
// usage: gen-session MEGABYTES [seed]   (unpacked, with envelopes, on stdout)
#include <stdio.h>
#include <stdlib.h>

static unsigned long long rng = 88172645463325252ULL;
static unsigned rnd(unsigned n) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (unsigned)(rng % n); }

// Words of text and tool output, in the proportions measured on the corpus'
// raw captures (2.27 MB): one backslash escape per ~185 bytes and one
// non-ASCII character per ~600 bytes; the rest plain ASCII.
static const char *ascii[] = {"the", " user", " wants", " me", " to", " run", " ls", " the", " src/main.c", " if",
    " return", " int", " file", " path", " done", "."};
static const char *escaped[] = {" line\\n", " \\\"quoted"};
static const char *utf8[] = {" 世界", " résumé"};
static const char *word(void)
{
    unsigned r = rnd(1000);
    if (r < 27) return escaped[rnd(2)];
    if (r < 35) return utf8[rnd(2)];
    return ascii[rnd(16)];
}

int main(int argc, char **argv)
{
    if (argc < 2) { fputs("usage: gen-session MEGABYTES [seed]\n", stderr); return 2; }
    unsigned long long limit = strtoull(argv[1], NULL, 10) << 20, out = 0;
    if (argc > 2) rng += strtoull(argv[2], NULL, 10);
    long long seq = 0, t = 1796028374883LL;
    out += (unsigned long long)printf("{\"type\":\"session\",\"version\":0,\"id\":\"dc1cbd91-e169-4cbd-ac5b-70fb4189cb1b\","
        "\"createdAt\":%lld,\"cwd\":\"/tmp/acp-snap-cwd-n0pjewjh\",\"delegationDepth\":0}\n", t);
    for (int turn = 1; out < limit; turn++) {
        out += (unsigned long long)printf("{\"type\":\"turn/start\",\"seq\":%lld,\"time\":%lld,\"data\":{\"turn\":%d}}\n", seq++, t++, turn);
        for (int step = 1; step <= 3 && out < limit; step++) {
            out += (unsigned long long)printf("{\"type\":\"step/start\",\"seq\":%lld,\"time\":%lld,\"data\":{\"turn\":%d,\"step\":%d}}\n", seq++, t, turn, step);
            out += (unsigned long long)printf("{\"type\":\"request/header\",\"seq\":%lld,\"time\":%lld,\"data\":{\"header\":{\"config\":{\"provider\":\"deepseek\",\"model\":\"deepseek-chat\"},\"system\":\"You are a coding agent. Work in the cwd; use tools.\",\"tools\":[{\"name\":\"bash\",\"description\":\"Run a command\",\"parameters\":{\"type\":\"object\"}}]},\"reason\":\"initial\"}}\n", seq++, t);
            const char *kinds[] = {"reasoning", "text"};
            for (int b = 0; b < 2; b++) {
                out += (unsigned long long)printf("{\"type\":\"assistant/chunk\",\"seq\":%lld,\"time\":%lld,\"data\":{\"turn\":%d,\"step\":%d,\"chunk\":{\"type\":\"block-start\",\"index\":%d,\"blockType\":\"%s\"}}}\n", seq++, t, turn, step, b, kinds[b]);
                int n = 20 + (int)rnd(80);
                for (int k = 0; k < n; k++) {
                    t += rnd(40);
                    out += (unsigned long long)printf("{\"type\":\"assistant/chunk\",\"seq\":%lld,\"time\":%lld,\"data\":{\"turn\":%d,\"step\":%d,\"chunk\":{\"type\":\"%s-delta\",\"index\":%d,\"text\":\"%s\"}}}\n",
                        seq++, t, turn, step, kinds[b], b, word());
                }
            }
            int n = 5 + (int)rnd(20);
            for (int k = 0; k < n; k++)
                out += (unsigned long long)printf("{\"type\":\"assistant/chunk\",\"seq\":%lld,\"time\":%lld,\"data\":{\"turn\":%d,\"step\":%d,\"chunk\":{\"type\":\"tool-call-delta\",\"index\":2,\"id\":\"call_%d_%d\",\"name\":\"bash\",\"argumentsDelta\":\"{\\\"cmd\\\": \\\"ls %d\\\"\"}}}\n",
                    seq++, t += rnd(9), turn, step, turn, step, k);
            out += (unsigned long long)printf("{\"type\":\"assistant/chunk\",\"seq\":%lld,\"time\":%lld,\"data\":{\"turn\":%d,\"step\":%d,\"chunk\":{\"type\":\"finish\",\"reason\":{\"kind\":\"tool-calls\"}}}}\n", seq++, t, turn, step);
            if (rnd(4) == 0) {   // a large tool output
                out += (unsigned long long)printf("{\"type\":\"tool/result\",\"seq\":%lld,\"time\":%lld,\"data\":{\"turn\":%d,\"callId\":\"call_%d_%d\",\"output\":\"", seq++, t, turn, turn, step);
                int m = 2000 + (int)rnd(20000);
                for (int k = 0; k < m; k++) out += (unsigned long long)printf("%s", word());
                out += (unsigned long long)printf("\"}}\n");
            }
            out += (unsigned long long)printf("{\"type\":\"step/end\",\"seq\":%lld,\"time\":%lld,\"data\":{\"turn\":%d,\"step\":%d}}\n", seq++, t, turn, step);
        }
        out += (unsigned long long)printf("{\"type\":\"turn/end\",\"seq\":%lld,\"time\":%lld,\"data\":{\"turn\":%d,\"reason\":{\"kind\":\"completed\"}}}\n", seq++, t, turn);
    }
    return ferror(stdout) || fclose(stdout) ? 2 : 0;
}

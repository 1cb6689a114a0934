# acpsnap - record-once / replay-deterministic snapshot tests for ACP agents.
# Targets: all check check-simd unit install uninstall clean bench bench-cmp fuzz
# fuzz-smoke deps depcheck check-agents, and the pipelines replay record
# refresh update guard review list (share/acpsnap.mk; see README).
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec

PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
MANDIR  ?= $(PREFIX)/share/man
SHAREDIR ?= $(PREFIX)/share/acpsnap
DESTDIR ?=

CC      ?= cc
CFLAGS  ?= -O2 -g
override CFLAGS := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-unused-parameter -Icommon $(CFLAGS)

# Everything a build makes lives in its flavour directory: build/rel, or
# build/asan with SANITIZE=1. $(BUILD)/obj holds objects and their .d files,
# $(BUILD)/bin every tool, the pipeline scripts and acpsnap-agent,
# $(BUILD)/test the unit tests.
ifeq ($(SANITIZE),1)
override CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
BUILD := build/asan
# The sanitizer runtimes are linked in where the compiler can (a probe, once,
# in $(BUILD)/san.mk): with gcc's shared libasan and libubsan, the leak check
# at exit scans libubsan's 6 MB of zeroed globals page by page, which made
# every short run 70 ms where a linked-in runtime takes 40 ms.
-include $(BUILD)/san.mk
override LDFLAGS += -fsanitize=address,undefined $(SAN_LDFLAGS)
$(BUILD)/san.mk:
	@mkdir -p $(@D)
	@printf 'int main(void) { return 0; }\n' > $(@D)/probe.c
	@s='-static-libasan -static-libubsan'; \
	 if $(CC) -fsanitize=address,undefined $$s -o $(@D)/probe $(@D)/probe.c 2>/dev/null && $(@D)/probe; then \
	   echo "SAN_LDFLAGS := $$s"; fi > $@.tmp
	@rm -f $(@D)/probe $(@D)/probe.c; mv $@.tmp $@
else
BUILD := build/rel
endif
OBJ := $(BUILD)/obj
OUT := $(BUILD)/bin

# Libraries: link flags from pkg-config where a .pc exists; libjq 1.6 has none.
pc_libs   = $(or $(shell pkg-config --libs $(1) 2>/dev/null),$(2))
pc_cflags = $(shell pkg-config --cflags $(1) 2>/dev/null)
LIBS.zstd         := $(call pc_libs,libzstd,-lzstd)
LIBS.microhttpd   := $(call pc_libs,libmicrohttpd,-lmicrohttpd)
LIBS.jq           := -ljq
LIBS.pthread      := -pthread
CFLAGS.microhttpd := $(call pc_cflags,libmicrohttpd)
CFLAGS.pthread    := -pthread
# The agent only compiles against curl's headers: it dlopens libcurl in live
# mode (example/model_deepseek.c), so replay never maps it.
CFLAGS.curl       := $(call pc_cflags,libcurl)
# replay-serve links it: its recording mode forwards to a live upstream.
LIBS.libcurl      := $(call pc_libs,libcurl,-lcurl)
CFLAGS.libcurl    := $(call pc_cflags,libcurl)
# (the fuzzers link libzstd as it comes, whichever build's link.mk is read:
# one fuzz build serves make check and make check SANITIZE=1)
FUZZ_LIBS.zstd    := $(LIBS.zstd)

# Start-up is most of what a short run costs (acp-drive and the agent for
# each scenario, every filter of a pipeline), and the dynamic loader is much
# of a start-up. So a release build links libzstd in, and links the tools
# that use no other library fully statically, as far as the toolchain can:
# a probe, once, writes what it can into $(BUILD)/link.mk. STATIC=0 links
# as before; sanitizer builds always do.
.DEFAULT_GOAL := all
STATIC ?= $(if $(filter 1,$(SANITIZE)),0,1)
ifeq ($(STATIC),1)
-include $(BUILD)/link.mk
endif
$(BUILD)/link.mk:
	@mkdir -p $(@D)
	@printf '#include <zstd.h>\nint main(void) { return ZSTD_versionNumber() == 0; }\n' > $(@D)/probe.c
	@{ z='-Wl,-Bstatic $(call pc_libs,--static libzstd,-lzstd -pthread) -Wl,-Bdynamic'; \
	   if $(CC) -o $(@D)/probe $(@D)/probe.c $$z 2>/dev/null && $(@D)/probe; then echo "LIBS.zstd := $$z"; fi; \
	   z='$(call pc_libs,--static libzstd,-lzstd -pthread)'; \
	   if $(CC) -static -o $(@D)/probe $(@D)/probe.c $$z 2>/dev/null && $(@D)/probe; then echo "LINK_STATIC := -static $$z"; fi; } > $@.tmp
	@rm -f $(@D)/probe $(@D)/probe.c; mv $@.tmp $@
# LINK_STATIC (-static and zstd's libraries) for tool NAME when it uses zstd alone
static_of = $(if $(filter $(1),$(TOOL_NAMES)),$(if $(filter-out zstd,$(call uses,$(1))),,$(LINK_STATIC)))

# What each binary uses besides libacpsnap.a (keys: a tool's name,
# acpsnap-agent, test/<unit>, fuzz/<target>). Not listed: zstd only, since
# common/in.c reads zstd input.
USES.default       := zstd
USES.scrub         := zstd jq
USES.replay-serve  := zstd microhttpd pthread libcurl
USES.acpsnap-agent := zstd curl pthread
USES.test/json_unit :=
USES.fuzz/json     :=
uses      = $(if $(filter undefined,$(origin USES.$(1))),$(USES.default),$(USES.$(1)))
libs_of   = $(strip $(foreach u,$(call uses,$(1)),$(LIBS.$(u))))
cflags_of = $(strip $(foreach u,$(call uses,$(1)),$(CFLAGS.$(u))))

LIB_SRC   := $(sort $(wildcard common/*.c))
LIB_OBJ   := $(patsubst %.c,$(OBJ)/%.o,$(LIB_SRC))
LIB       := $(BUILD)/libacpsnap.a
# A tool is bin/<tool>.c, or a directory bin/<tool>/ whose .c files make one
# binary (compiled with -Ibin/<tool> for its private headers).
DIR_TOOLS := $(patsubst bin/%/,%,$(sort $(dir $(wildcard bin/*/*.c))))
TOOL_NAMES := $(sort $(patsubst bin/%.c,%,$(wildcard bin/*.c)) $(DIR_TOOLS))
tool_src   = $(wildcard bin/$(1).c) $(sort $(wildcard bin/$(1)/*.c))
TOOLS     := $(addprefix $(OUT)/,$(TOOL_NAMES))
SCRIPT_SRC := $(filter-out %.c $(addprefix bin/,$(DIR_TOOLS)),$(wildcard bin/acpsnap-*))
SCRIPTS   := $(patsubst bin/%,$(OUT)/%,$(SCRIPT_SRC))
AGENT_SRC := $(sort $(wildcard example/*.c))
AGENT_OBJ := $(patsubst %.c,$(OBJ)/%.o,$(AGENT_SRC))
AGENT     := $(if $(AGENT_SRC),$(OUT)/acpsnap-agent)
UNIT_SRC  := $(sort $(wildcard test/unit/*.c))
UNITS     := $(patsubst test/unit/%.c,$(BUILD)/test/%,$(UNIT_SRC))
ALL_OBJ   := $(LIB_OBJ) $(AGENT_OBJ) $(patsubst %.c,$(OBJ)/%.o,$(foreach t,$(TOOL_NAMES),$(call tool_src,$(t))) $(UNIT_SRC))
MAN1      := $(wildcard share/man/man1/*.1)
MAN5      := $(wildcard share/man/man5/*.5)
MAN7      := $(wildcard share/man/man7/*.7)

.PHONY: all deps depcheck check check-simd check-agents test unit install uninstall clean bench bench-cmp fuzz fuzz-smoke tools FORCE
.SECONDARY:
.DELETE_ON_ERROR:
all: $(TOOLS) $(SCRIPTS) $(AGENT)

# deps: install what is missing on Debian (apt-get; one quiet dpkg-query when
# everything is there). depcheck: name every missing header, library and
# command, exit non-zero (any system). check and replay run deps where
# dpkg-query exists, depcheck elsewhere.
deps:
	@./share/deps.sh
depcheck:
	@CC='$(CC)' ./share/deps.sh --check
PREP := $(if $(shell command -v dpkg-query 2>/dev/null),deps,depcheck)

# The snapshot pipelines over scenarios/, the fragment's targets (replay
# record refresh update guard review list, share/acpsnap.mk): SCENARIO=<glob>,
# -jN runs N scenarios at once, SHARD=i/n one shard of them,
# ACPSNAP_REPORT=junit:FILE writes a report. `make replay` is keyless and
# writes nothing in the tree; a failing scenario leaves its new outputs in
# .acpsnap/pending for `make review`. Each first runs tools: deps, then the
# build the pipelines run.
ACPSNAP_SNAPSHOTS := scenarios
ACPSNAP_PROFILE   := scenarios/acpsnap-agent.profile
ACPSNAP_BIN       := $(CURDIR)/$(OUT)
ACPSNAP_PREREQS   := tools
include share/acpsnap.mk
tools: $(PREP)
	@$(MAKE) --no-print-directory all

# The flags a flavour was built with: each stamp is rewritten (made newer)
# only when its text changes, so objects rebuild when the compile flags
# change and binaries relink when the link flags do.
CFLAGS_NOW  = $(CC) $(CFLAGS) $(foreach v,$(sort $(filter CFLAGS.%,$(.VARIABLES))),$(v)=$($(v)))
LIBS_NOW    = $(foreach v,$(sort $(filter LIBS.% USES.%,$(.VARIABLES))),$(v)=$($(v))) LINK_STATIC=$(LINK_STATIC)
LDFLAGS_NOW = $(CC) $(LDFLAGS) $(LIBS_NOW)
define stamp
$(1): FORCE
	@mkdir -p $$(@D); t='$$(subst ','\'',$$($(2)))'; [ "$$$$(cat $$@ 2>/dev/null)" = "$$$$t" ] || printf '%s\n' "$$$$t" > $$@
endef
$(eval $(call stamp,$(BUILD)/cflags,CFLAGS_NOW))
$(eval $(call stamp,$(BUILD)/ldflags,LDFLAGS_NOW))
FORCE:

# Objects, with their header dependencies from the compiler (-MMD -MP).
$(OBJ)/%.o: %.c $(BUILD)/cflags
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(OBJ_CFLAGS) -MMD -MP -c -o $@ $<
-include $(ALL_OBJ:.o=.d)
$(OBJ)/example/%.o: OBJ_CFLAGS = -Iexample $(call cflags_of,acpsnap-agent)
$(foreach t,$(TOOL_NAMES),$(eval $(OBJ)/bin/$(t).o: OBJ_CFLAGS = $$(call cflags_of,$(t))))
$(foreach t,$(DIR_TOOLS),$(eval $(OBJ)/bin/$(t)/%.o: OBJ_CFLAGS = -Ibin/$(t) $$(call cflags_of,$(t))))

$(LIB): $(LIB_OBJ)
	rm -f $@; ar rcs $@ $^

# link NAME: the objects and archives among the prerequisites, then NAME's libraries.
link = $(CC) $(LDFLAGS) -o $@ $(filter %.o %.a,$^) $(or $(call static_of,$(1)),$(call libs_of,$(1)))
define tool_rule
$(OUT)/$(1): $(patsubst %.c,$(OBJ)/%.o,$(call tool_src,$(1))) $(LIB) $(BUILD)/ldflags
	@mkdir -p $$(@D)
	$$(call link,$(1))
endef
$(foreach t,$(TOOL_NAMES),$(eval $(call tool_rule,$(t))))
$(OUT)/acpsnap-agent: $(AGENT_OBJ) $(LIB) $(BUILD)/ldflags
	@mkdir -p $(@D)
	$(call link,acpsnap-agent)
# The pipeline scripts start bash by the path found here, not through
# env(1): one process fewer for every run of a pipeline (none found: env).
BASH_PATH := $(shell command -v bash 2>/dev/null)
$(SCRIPTS): $(OUT)/%: bin/%
	@mkdir -p $(@D)
	sed '1s|^#!/usr/bin/env bash$$|#!$(or $(filter /%,$(BASH_PATH)),/usr/bin/env bash)|' $< > $@.tmp && chmod 755 $@.tmp && mv -f $@.tmp $@
$(UNITS): $(BUILD)/test/%: $(OBJ)/test/unit/%.o $(LIB) $(BUILD)/ldflags
	@mkdir -p $(@D)
	$(call link,test/$*)

# check: deps, build, every test. TESTS=test/foo.bats narrows the bats run.
# bats finds bats-support and bats-assert in BATS_LIB_PATH and, when GNU
# parallel is installed, runs BATS_JOBS suites at once (the tests of one
# suite stay in order: bats 1.8 polls a free slot once a second within a
# file, which made the run slower than a serial one).
TESTS ?= test
BATS_LIB_PATH ?= /usr/lib/bats
export BATS_LIB_PATH
BATS_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
bats_jobs = $(if $(filter-out 0 1,$(BATS_JOBS)),$(if $(shell parallel --version 2>/dev/null | grep -q 'GNU parallel' && echo y),--jobs $(BATS_JOBS) --no-parallelize-within-files))
# With TESTS=test (the default) the suites go longest first, so that the
# last to start is a short one: BATS_SLOW names those that take longest.
BATS_SLOW ?= test/simd-layout.bats test/simd.bats test/hostile/atomic.bats test/fixture-guard.bats \
	test/scrub-corpus.bats test/replay-derive-corpus.bats test/pipelines.bats test/codec-corpus.bats
bats_files = $(if $(filter test,$(TESTS)),$(filter $(bats_all),$(BATS_SLOW)) $(filter-out $(BATS_SLOW),$(bats_all)),-r $(TESTS))
bats_all = $(sort $(shell find test -name '*.bats'))
check: $(PREP)
	@$(MAKE) --no-print-directory all $(UNITS)
	@for u in $(UNITS); do $$u || exit 1; done; [ -z "$(UNITS)" ] || echo "unit tests: ok"
	@$(MAKE) --no-print-directory fuzz-smoke
	ACPSNAP_BUILD=$(BUILD) bats $(bats_jobs) --formatter tap --print-output-on-failure $(bats_files)
test: check

# check-agents: the worked examples, real third-party agents under acpsnap
# (examples/opencode, examples/codex): each example's make replay, keyless
# and offline. Each installs its pinned agent from npm into build/agents on
# first use; deps installs npm when it is missing (share/deps.sh --agents).
# One example after the other: scenarios of the same name share a spill root.
AGENT_EXAMPLES := $(patsubst %/Makefile,%,$(sort $(wildcard examples/*/Makefile)))
check-agents: $(if $(filter deps,$(PREP)),deps-agents,depcheck-agents)
	@$(MAKE) --no-print-directory all
	@for e in $(AGENT_EXAMPLES); do echo "== $$e"; $(MAKE) --no-print-directory -C $$e replay record-loopback || exit 1; done
.PHONY: deps-agents depcheck-agents
deps-agents:
	@./share/deps.sh --agents
depcheck-agents:
	@CC='$(CC)' ./share/deps.sh --check --agents

# check-simd: the scanner's instruction sets, each forced in turn
# (ACPSNAP_SIMD, acpsnap(7)): the unit tests and every suite that parses JSON,
# once per level this CPU runs; a level it lacks is named and skipped, and
# so is the level auto picks (make check ran it) unless SIMD_ALL=1. Under
# SANITIZE=1 without LeakSanitizer's check at exit (SIMD_LEAKS=1 keeps it):
# what a run allocates does not depend on the level, and make check
# SANITIZE=1 has checked the same suites for leaks; the check is most of a
# short sanitized run's time.
# (test/simd*.bats are not among them: they force every level themselves.)
SIMD_LEVELS ?= avx512 avx2 sse2 scalar
# (longest first)
SIMD_TESTS  ?= test/scrub-corpus.bats test/replay-derive-corpus.bats test/codec-corpus.bats \
	test/jsonl-pack.bats test/hostile/codec.bats test/jdiff.bats test/scrub.bats test/replay-derive.bats \
	test/hostile/scrub.bats test/fixture-guard-corpus.bats test/jsonl-project.bats
simd_env = $(if $(filter 1,$(SANITIZE)),$(if $(SIMD_LEAKS),,ASAN_OPTIONS=detect_leaks=0$(if $(ASAN_OPTIONS),:$(ASAN_OPTIONS))))
check-simd: $(PREP)
	@$(MAKE) --no-print-directory all $(UNITS)
	@auto=$$($(BUILD)/test/simd_unit | sed -n 's/^simd_unit: ok (\([a-z0-9]*\);.*/\1/p'); \
	for l in $(SIMD_LEVELS); do \
	  if ! echo '{"type":"session","id":"x"}' | ACPSNAP_SIMD=$$l $(OUT)/jsonl-project >/dev/null 2>&1; then \
	    echo "== ACPSNAP_SIMD=$$l: this CPU cannot run it, skipped"; continue; fi; \
	  if [ "$$l" = "$$auto" ] && [ -z "$(SIMD_ALL)" ]; then \
	    echo "== ACPSNAP_SIMD=$$l: the level auto picks here, which make check runs (SIMD_ALL=1 runs it again)"; continue; fi; \
	  echo "== ACPSNAP_SIMD=$$l"; \
	  for u in $(UNITS); do ACPSNAP_SIMD=$$l $$u || exit 1; done; \
	  ACPSNAP_SIMD=$$l ACPSNAP_BUILD=$(BUILD) $(simd_env) bats $(bats_jobs) --formatter tap --print-output-on-failure $(SIMD_TESTS) || exit 1; \
	done

unit: $(UNITS)
	@for u in $(UNITS); do $$u || exit 1; done

# fuzz: libFuzzer targets (clang) in build/fuzz. fuzz-smoke runs each briefly.
FUZZ        := build/fuzz
FUZZ_CC     := clang
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -Icommon -fsanitize=address,undefined
FUZZ_SRC    := $(sort $(wildcard test/fuzz/*.c))
FUZZERS     := $(patsubst test/fuzz/%.c,$(FUZZ)/%,$(FUZZ_SRC))
FUZZ_OBJ    := $(patsubst %.c,$(FUZZ)/obj/%.o,$(LIB_SRC) $(FUZZ_SRC))
FUZZ_CFLAGS_NOW  = $(FUZZ_CC) $(FUZZ_CFLAGS)
fuzz_libs_of     = $(strip $(foreach u,$(call uses,fuzz/$(1)),$(or $(FUZZ_LIBS.$(u)),$(LIBS.$(u)))))
FUZZ_LDFLAGS_NOW = $(FUZZ_CC) $(foreach f,$(FUZZ_SRC),$(call fuzz_libs_of,$(basename $(notdir $(f)))))
$(eval $(call stamp,$(FUZZ)/cflags,FUZZ_CFLAGS_NOW))
$(eval $(call stamp,$(FUZZ)/ldflags,FUZZ_LDFLAGS_NOW))
$(FUZZ_OBJ): $(FUZZ)/obj/%.o: %.c $(FUZZ)/cflags
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<
-include $(FUZZ_OBJ:.o=.d)
$(FUZZ)/libacpsnap.a: $(patsubst %.c,$(FUZZ)/obj/%.o,$(LIB_SRC))
	rm -f $@; ar rcs $@ $^
$(FUZZERS): $(FUZZ)/%: $(FUZZ)/obj/test/fuzz/%.o $(FUZZ)/libacpsnap.a $(FUZZ)/ldflags
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $(filter %.o %.a,$^) $(call fuzz_libs_of,$*)
fuzz: $(FUZZERS)
# The smoke runs once for a build of the fuzzers (its stamp, $(FUZZ)/smoke):
# make check and make check SANITIZE=1 share them, sanitized both times.
fuzz-smoke: $(FUZZ)/smoke
$(FUZZ)/smoke: $(FUZZERS) $(wildcard test/fuzz/seeds-*/*)
	@for f in $(FUZZERS); do n=$$(basename $$f); mkdir -p $(FUZZ)/corpus-$$n; \
	  ASAN_OPTIONS=detect_leaks=0 $$f -runs=20000 -max_len=4096 $(FUZZ)/corpus-$$n test/fuzz/seeds-$$n >/dev/null 2>$(FUZZ)/$$n.log \
	    || { cat $(FUZZ)/$$n.log; exit 1; }; echo "fuzz smoke: $$n ok"; done
	@touch $@

# bench: throughput against floors (cat, wc -l, zstd -d, jq), memory, latency
# (test/bench/run.sh: BENCH_RUNS, BENCH_MB, BENCH_OUT...). bench-cmp: the
# tools of BASE (a git revision, default HEAD: the committed tree), built in a
# temporary worktree, against this build, output for output over the corpus
# and the bench inputs; exit 1 on a difference (test/bench/cmp.sh).
bench: all
	@ACPSNAP_BUILD=$(BUILD) ./test/bench/run.sh
bench-cmp: all
	@ACPSNAP_BUILD=$(BUILD) ./test/bench/cmp.sh '$(or $(BASE),HEAD)'

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(SHAREDIR)
	install -m 755 $(TOOLS) $(SCRIPTS) $(AGENT) $(DESTDIR)$(BINDIR)
	[ -z "$(MAN1)" ] || install -m 644 $(MAN1) $(DESTDIR)$(MANDIR)/man1
	[ -z "$(MAN5)" ] || install -m 644 $(MAN5) $(DESTDIR)$(MANDIR)/man5
	[ -z "$(MAN7)" ] || install -m 644 $(MAN7) $(DESTDIR)$(MANDIR)/man7
	for f in $(wildcard share/*.mk share/rules/*); do install -m 644 $$f $(DESTDIR)$(SHAREDIR); done
	[ ! -f share/pre-commit ] || install -m 755 share/pre-commit $(DESTDIR)$(SHAREDIR)
	install -d $(DESTDIR)$(SHAREDIR)/ci
	for f in $(wildcard share/ci/*); do install -m 644 $$f $(DESTDIR)$(SHAREDIR)/ci; done

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(TOOLS) $(SCRIPTS) $(AGENT)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN1)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man5/,$(notdir $(MAN5)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man7/,$(notdir $(MAN7)))
	rm -rf $(DESTDIR)$(SHAREDIR)

clean:
	rm -rf build

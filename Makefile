# acpsnap - record-once / replay-deterministic snapshot tests for ACP agents.
# Targets: all check install uninstall clean bench fuzz deps, and the pipelines
# replay record refresh update (see README).
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
LDLIBS_ALL := -lzstd -ljq -lcurl -lmicrohttpd -lm -lpthread

ifeq ($(SANITIZE),1)
override CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
override LDFLAGS += -fsanitize=address,undefined
BUILD := build/asan
else
BUILD := build/rel
endif

LIB_SRC   := $(sort $(wildcard common/*.c))
LIB_OBJ   := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC))
LIB       := $(BUILD)/libacpsnap.a
TOOL_SRC  := $(sort $(wildcard bin/*.c))
TOOLS     := $(patsubst bin/%.c,bin/%,$(TOOL_SRC))
AGENT_SRC := $(sort $(wildcard example/*.c))
AGENT     := $(if $(AGENT_SRC),example/acpsnap-agent)
UNIT_SRC  := $(sort $(wildcard test/unit/*.c))
UNITS     := $(patsubst test/unit/%.c,$(BUILD)/test/%,$(UNIT_SRC))
SCRIPTS   := $(wildcard bin/acpsnap-*)
MAN1      := $(wildcard share/man/man1/*.1)
MAN5      := $(wildcard share/man/man5/*.5)
MAN7      := $(wildcard share/man/man7/*.7)

.PHONY: all deps check test unit install uninstall clean bench fuzz fuzz-smoke replay record refresh update
all: $(TOOLS) $(AGENT) $(UNITS)

# The snapshot pipelines over scenarios/ (share/acpsnap.mk): SCENARIO=<glob>,
# -jN runs N scenarios at once. `make replay` is keyless and writes nothing.
ACPSNAP_SNAPSHOTS := scenarios
ACPSNAP_PROFILE   := scenarios/acpsnap-agent.profile
ACPSNAP_BIN       := $(CURDIR)/bin
include share/acpsnap.mk
replay record refresh update: deps
	@$(MAKE) --no-print-directory all
	@$(_acpsnap) --mode $@ '$(SCENARIO)'

# Tool binaries live beside their sources (bin/); the build flavour that made
# them is recorded so a SANITIZE=1 check never tests a release binary.
FLAVOUR := $(BUILD)/.flavour
$(FLAVOUR): FORCE
	@mkdir -p $(BUILD); echo "$(CC) $(CFLAGS) $(LDFLAGS)" | cmp -s - $@ || echo "$(CC) $(CFLAGS) $(LDFLAGS)" > $@
	@f=build/.current; [ "$$(cat $$f 2>/dev/null)" = "$(BUILD)" ] || { echo "$(BUILD)" > $$f; rm -f $(TOOLS) example/acpsnap-agent; }
FORCE:

$(BUILD)/%.o: %.c common/*.h $(FLAVOUR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(LIB): $(LIB_OBJ)
	rm -f $@; ar rcs $@ $^

bin/%: $(BUILD)/bin/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -Wl,--as-needed $(LDLIBS_ALL)

# Multi-file tools: bin/<tool>/*.c (with a private header) linked into
# $(BUILD)/tools/<tool>, since bin/<tool> is their directory; that directory
# leads PATH for the recipes (tests, pipelines) so they find the tool.
MULTI     := $(patsubst bin/%/,%,$(sort $(dir $(wildcard bin/*/*.c))))
MULTI_BIN := $(addprefix $(BUILD)/tools/,$(MULTI))
TOOLS     += $(MULTI_BIN)
all: $(MULTI_BIN)
export PATH := $(CURDIR)/$(BUILD)/tools:$(PATH)
define multi_tool
$(BUILD)/tools/$(1): $(patsubst %.c,$(BUILD)/%.o,$(wildcard bin/$(1)/*.c)) $(LIB)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(LDFLAGS) -o $$@ $$^ -Wl,--as-needed $$(LDLIBS_ALL)
$(patsubst %.c,$(BUILD)/%.o,$(wildcard bin/$(1)/*.c)): $(wildcard bin/$(1)/*.h)
endef
$(foreach t,$(MULTI),$(eval $(call multi_tool,$(t))))

AGENT_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(AGENT_SRC))
$(BUILD)/example/%.o: example/%.c example/*.h common/*.h $(FLAVOUR)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Iexample -c -o $@ $<
example/acpsnap-agent: $(AGENT_OBJ) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ -Wl,--as-needed $(LDLIBS_ALL)

$(BUILD)/test/%: test/unit/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ -Wl,--as-needed $(LDLIBS_ALL)

# deps: install missing Debian packages (quiet and fast when all are present).
deps:
	@./share/deps.sh

# check: deps, build, every test. TESTS=test/foo.bats narrows the bats run.
TESTS ?= test
check: deps
	@$(MAKE) --no-print-directory all
	@for u in $(UNITS); do $$u || exit 1; done; [ -z "$(UNITS)" ] || echo "unit tests: ok"
	@$(MAKE) --no-print-directory fuzz-smoke
	ACPSNAP_BUILD=$(BUILD) bats --formatter tap --print-output-on-failure -r $(TESTS)
test: check

unit: $(UNITS)
	@for u in $(UNITS); do $$u || exit 1; done

# fuzz: libFuzzer targets (clang). fuzz-smoke runs each briefly.
FUZZ_SRC := $(sort $(wildcard test/fuzz/*.c))
FUZZERS  := $(patsubst test/fuzz/%.c,build/fuzz/%,$(FUZZ_SRC))
build/fuzz/%: test/fuzz/%.c $(LIB_SRC) common/*.h
	@mkdir -p build/fuzz
	clang -std=c11 -D_GNU_SOURCE -g -O1 -Icommon -fsanitize=fuzzer,address,undefined -o $@ $< $(LIB_SRC) $(LDLIBS_ALL)
fuzz: $(FUZZERS)
fuzz-smoke: $(FUZZERS)
	@for f in $(FUZZERS); do n=$$(basename $$f); mkdir -p build/fuzz/corpus-$$n; \
	  ASAN_OPTIONS=detect_leaks=0 $$f -runs=20000 -max_len=4096 build/fuzz/corpus-$$n test/fuzz/seeds-$$n >/dev/null 2>build/fuzz/$$n.log \
	    || { cat build/fuzz/$$n.log; exit 1; }; echo "fuzz smoke: $$n ok"; done

bench: all
	@./test/bench/run.sh

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(SHAREDIR)
	install -m 755 $(TOOLS) $(SCRIPTS) $(DESTDIR)$(BINDIR)
	[ -z "$(AGENT)" ] || install -m 755 $(AGENT) $(DESTDIR)$(BINDIR)
	[ -z "$(MAN1)" ] || install -m 644 $(MAN1) $(DESTDIR)$(MANDIR)/man1
	[ -z "$(MAN5)" ] || install -m 644 $(MAN5) $(DESTDIR)$(MANDIR)/man5
	[ -z "$(MAN7)" ] || install -m 644 $(MAN7) $(DESTDIR)$(MANDIR)/man7
	for f in $(wildcard share/*.mk share/rules/*); do install -m 644 $$f $(DESTDIR)$(SHAREDIR); done
	[ ! -f share/pre-commit ] || install -m 755 share/pre-commit $(DESTDIR)$(SHAREDIR)

uninstall:
	rm -f $(addprefix $(DESTDIR)$(BINDIR)/,$(notdir $(TOOLS) $(SCRIPTS) $(AGENT)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN1)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man5/,$(notdir $(MAN5)))
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man7/,$(notdir $(MAN7)))
	rm -rf $(DESTDIR)$(SHAREDIR)

clean:
	rm -rf build $(TOOLS) example/acpsnap-agent

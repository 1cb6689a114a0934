# acpsnap.mk - the snapshot pipelines as make targets: the whole workflow,
# for any project.
#
#   ACPSNAP_SNAPSHOTS := tests/snapshots          # the snapshots directory (scenarios.jsonl)
#   ACPSNAP_PROFILE   := tests/snapshots/my-agent.profile   # acpsnap-profile(5)
#   include /usr/local/share/acpsnap/acpsnap.mk
#
# Targets: replay record refresh update guard review list, the names the
# pipelines' hints print ("to accept this output: make refresh
# SCENARIO=..."). A project whose own targets clash sets a prefix before the
# include, ACPSNAP_TARGET_PREFIX := acpsnap- (giving acpsnap-replay,
# acpsnap-record, ...), and the hints then name those.
#   replay    keyless replay of the selected scenarios; writes nothing
#   record    record them (live API, ACPSNAP_UPSTREAM, or
#             ACPSNAP_PROVIDER=replay-serve)
#   refresh   rewrite the outputs and session fixtures that changed
#   update    rewrite only stdout.expected.jsonl
#   guard     fixture-guard on the snapshots directory
#   review    ask about the pending entries failing replays left
#             (acpsnap-review(1))
#   list      print the selected scenarios' names
# SCENARIO=<glob> selects scenarios (default: all); `make -jN` runs N
# scenarios at once (ACPSNAP_JOBS=N does the same).
# SHARD=i/n runs shard i of n of the selection (ACPSNAP_TIMINGS_IN=FILE:
# balanced by the durations an ACPSNAP_TIMINGS=FILE run wrote);
# ACPSNAP_REPORT=junit:FILE,tap:FILE writes reports (acpsnap-report(1)).
# ACPSNAP_PROVIDER=replay-serve makes record play each scenario's
# provider.jsonl from a loopback replay-serve instead of the live API.
# ACPSNAP_UPSTREAM=URL (the provider's base URL) makes record go through
# replay-serve's recording proxy in front of that provider, for a profile
# saying provider = replay-serve; ACPSNAP_UPSTREAM_KEY_ENV=NAME names the
# variable holding the provider's key (the name, never the key), which only
# the proxy sees. This is how a "sessionLog": false scenario's provider.jsonl
# is recorded: once through the proxy, then written with its transcript only
# after two replays of it agree (acpsnap-replay(1), TRANSCRIPT-ONLY SCENARIOS).
# ACPSNAP_BIN: where the acpsnap tools are (default: found on PATH), e.g.
# an acpsnap tree's build/rel/bin; the agent of a profile whose command is
# a bare name is looked up there first too.
# ACPSNAP_PREREQS: prerequisites of every target (set before the include),
# e.g. the target that builds the agent or the tools.

ACPSNAP_SNAPSHOTS ?= snapshots
ACPSNAP_PROFILE   ?= $(firstword $(wildcard $(ACPSNAP_SNAPSHOTS)/*.profile))
ACPSNAP_BIN       ?=
ACPSNAP_TARGET_PREFIX ?=
ACPSNAP_PREREQS   ?=
SCENARIO          ?= *
SHARD             ?=

# The job count make was given (-jN; a bare -j means one job per CPU).
_acpsnap_j := $(patsubst -j%,%,$(filter -j%,$(MAKEFLAGS)))
_acpsnap_j := $(if $(filter -j,$(MAKEFLAGS)),$(shell nproc 2>/dev/null || echo 2),$(_acpsnap_j))
ACPSNAP_JOBS ?= $(or $(_acpsnap_j),1)

# User values reach the recipes through the environment, never pasted into
# shell text: a SCENARIO given on the command line or in the environment is
# taken unexpanded ($(value ...)), so neither make nor the shell interprets a
# quote, $(...), ; or anything else in it.
_acpsnap_raw = $(if $(filter command line environment%,$(origin $(1))),$(value $(1)),$($(1)))
export ACPSNAP_MK_SCENARIO := $(call _acpsnap_raw,SCENARIO)
export ACPSNAP_MK_SHARD := $(call _acpsnap_raw,SHARD)
export ACPSNAP_MK_REPORT := $(call _acpsnap_raw,ACPSNAP_REPORT)
export ACPSNAP_MK_TIMINGS := $(call _acpsnap_raw,ACPSNAP_TIMINGS)
export ACPSNAP_MK_TIMINGS_IN := $(call _acpsnap_raw,ACPSNAP_TIMINGS_IN)
# (make would export a command-line SCENARIO itself, expanding it to do so)
unexport SCENARIO SHARD ACPSNAP_REPORT ACPSNAP_TIMINGS ACPSNAP_TIMINGS_IN ACPSNAP_TARGET_PREFIX
export ACPSNAP_MK_SNAPSHOTS = $(ACPSNAP_SNAPSHOTS)
export ACPSNAP_MK_PROFILE = $(ACPSNAP_PROFILE)
export ACPSNAP_MK_JOBS = $(ACPSNAP_JOBS)
export ACPSNAP_MK_BIN = $(ACPSNAP_BIN)
# The targets' names, fixed here: the prefix must be set before the include.
_acpsnap_p := $(ACPSNAP_TARGET_PREFIX)
export ACPSNAP_MK_TARGET_PREFIX := $(_acpsnap_p)
_acpsnap_tool = "$${ACPSNAP_MK_BIN:+$$ACPSNAP_MK_BIN/}$(1)"
_acpsnap = ACPSNAP_REPORT="$$ACPSNAP_MK_REPORT" ACPSNAP_TIMINGS="$$ACPSNAP_MK_TIMINGS" \
           ACPSNAP_TIMINGS_IN="$$ACPSNAP_MK_TIMINGS_IN" ACPSNAP_TARGET_PREFIX="$$ACPSNAP_MK_TARGET_PREFIX" \
           $(call _acpsnap_tool,acpsnap-replay) -d "$$ACPSNAP_MK_SNAPSHOTS" \
           $${ACPSNAP_MK_PROFILE:+-p "$$ACPSNAP_MK_PROFILE"} -j "$$ACPSNAP_MK_JOBS" \
           $${ACPSNAP_MK_SHARD:+--shard "$$ACPSNAP_MK_SHARD"}
_acpsnap_review = $(call _acpsnap_tool,acpsnap-review) -d "$$ACPSNAP_MK_SNAPSHOTS"

.PHONY: $(addprefix $(_acpsnap_p),replay record refresh update guard review list)
$(_acpsnap_p)replay: $(ACPSNAP_PREREQS)
	@$(_acpsnap) --mode replay -- "$$ACPSNAP_MK_SCENARIO"
$(_acpsnap_p)record: $(ACPSNAP_PREREQS)
	@$(_acpsnap) --mode record -- "$$ACPSNAP_MK_SCENARIO"
$(_acpsnap_p)refresh: $(ACPSNAP_PREREQS)
	@$(_acpsnap) --mode refresh -- "$$ACPSNAP_MK_SCENARIO"
$(_acpsnap_p)update: $(ACPSNAP_PREREQS)
	@$(_acpsnap) --mode update -- "$$ACPSNAP_MK_SCENARIO"
$(_acpsnap_p)guard: $(ACPSNAP_PREREQS)
	@$(call _acpsnap_tool,fixture-guard) "$$ACPSNAP_MK_SNAPSHOTS"
$(_acpsnap_p)review: $(ACPSNAP_PREREQS)
	@$(_acpsnap_review) -- "$$ACPSNAP_MK_SCENARIO"
$(_acpsnap_p)list: $(ACPSNAP_PREREQS)
	@$(_acpsnap) --list -- "$$ACPSNAP_MK_SCENARIO"

# acpsnap.mk - the snapshot pipelines as make targets, for any project.
#
#   ACPSNAP_SNAPSHOTS := tests/snapshots          # the snapshots directory (scenarios.jsonl)
#   ACPSNAP_PROFILE   := tests/snapshots/my-agent.profile   # acpsnap-profile(5)
#   include /usr/local/share/acpsnap/acpsnap.mk
#
# Targets: acpsnap-replay acpsnap-record acpsnap-refresh acpsnap-update
# acpsnap-review (and acpsnap-list). SCENARIO=<glob> selects scenarios
# (default: all); acpsnap-review asks about the pending entry of each
# selected scenario a failing replay left (acpsnap-review(1));
# `make -jN` runs N scenarios at once (ACPSNAP_JOBS=N does the same).
# SHARD=i/n runs shard i of n of the selection (ACPSNAP_TIMINGS_IN=FILE:
# balanced by the durations an ACPSNAP_TIMINGS=FILE run wrote);
# ACPSNAP_REPORT=junit:FILE,tap:FILE writes reports (acpsnap-report(1)).
# ACPSNAP_PROVIDER=replay-serve makes record play each scenario's
# provider.jsonl from a loopback replay-serve instead of the live API.
# ACPSNAP_BIN: where the acpsnap tools are (default: found on PATH), e.g.
# an acpsnap tree's build/rel/bin; the agent of a profile whose command is
# a bare name is looked up there first too.

ACPSNAP_SNAPSHOTS ?= snapshots
ACPSNAP_PROFILE   ?= $(firstword $(wildcard $(ACPSNAP_SNAPSHOTS)/*.profile))
ACPSNAP_BIN       ?=
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
unexport SCENARIO SHARD ACPSNAP_REPORT ACPSNAP_TIMINGS ACPSNAP_TIMINGS_IN
export ACPSNAP_MK_SNAPSHOTS = $(ACPSNAP_SNAPSHOTS)
export ACPSNAP_MK_PROFILE = $(ACPSNAP_PROFILE)
export ACPSNAP_MK_JOBS = $(ACPSNAP_JOBS)
export ACPSNAP_MK_BIN = $(ACPSNAP_BIN)
_acpsnap = ACPSNAP_REPORT="$$ACPSNAP_MK_REPORT" ACPSNAP_TIMINGS="$$ACPSNAP_MK_TIMINGS" \
           ACPSNAP_TIMINGS_IN="$$ACPSNAP_MK_TIMINGS_IN" \
           "$${ACPSNAP_MK_BIN:+$$ACPSNAP_MK_BIN/}acpsnap-replay" -d "$$ACPSNAP_MK_SNAPSHOTS" \
           $${ACPSNAP_MK_PROFILE:+-p "$$ACPSNAP_MK_PROFILE"} -j "$$ACPSNAP_MK_JOBS" \
           $${ACPSNAP_MK_SHARD:+--shard "$$ACPSNAP_MK_SHARD"}
_acpsnap_review = "$${ACPSNAP_MK_BIN:+$$ACPSNAP_MK_BIN/}acpsnap-review" -d "$$ACPSNAP_MK_SNAPSHOTS"

.PHONY: acpsnap-replay acpsnap-record acpsnap-refresh acpsnap-update acpsnap-review acpsnap-list
acpsnap-replay:
	@$(_acpsnap) --mode replay -- "$$ACPSNAP_MK_SCENARIO"
acpsnap-record:
	@$(_acpsnap) --mode record -- "$$ACPSNAP_MK_SCENARIO"
acpsnap-refresh:
	@$(_acpsnap) --mode refresh -- "$$ACPSNAP_MK_SCENARIO"
acpsnap-update:
	@$(_acpsnap) --mode update -- "$$ACPSNAP_MK_SCENARIO"
acpsnap-review:
	@$(_acpsnap_review) -- "$$ACPSNAP_MK_SCENARIO"
acpsnap-list:
	@$(_acpsnap) --list -- "$$ACPSNAP_MK_SCENARIO"

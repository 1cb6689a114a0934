# acpsnap.mk - the snapshot pipelines as make targets, for any project.
#
#   ACPSNAP_SNAPSHOTS := tests/snapshots          # the snapshots directory (scenarios.jsonl)
#   ACPSNAP_PROFILE   := tests/snapshots/my-agent.profile   # acpsnap-profile(5)
#   include /usr/local/share/acpsnap/acpsnap.mk
#
# Targets: acpsnap-replay acpsnap-record acpsnap-refresh acpsnap-update
# (and acpsnap-list). SCENARIO=<glob> selects scenarios (default: all);
# `make -jN` runs N scenarios at once (ACPSNAP_JOBS=N does the same).
# ACPSNAP_PROVIDER=replay-serve makes record play each scenario's
# provider.jsonl from a loopback replay-serve instead of the live API.
# ACPSNAP_BIN: where the acpsnap tools are (default: found on PATH), e.g.
# an acpsnap tree's build/rel/bin; the agent of a profile whose command is
# a bare name is looked up there first too.

ACPSNAP_SNAPSHOTS ?= snapshots
ACPSNAP_PROFILE   ?= $(firstword $(wildcard $(ACPSNAP_SNAPSHOTS)/*.profile))
ACPSNAP_BIN       ?=
SCENARIO          ?= *

# The job count make was given (-jN; a bare -j means one job per CPU).
_acpsnap_j := $(patsubst -j%,%,$(filter -j%,$(MAKEFLAGS)))
_acpsnap_j := $(if $(filter -j,$(MAKEFLAGS)),$(shell nproc 2>/dev/null || echo 2),$(_acpsnap_j))
ACPSNAP_JOBS ?= $(or $(_acpsnap_j),1)

_acpsnap = $(if $(ACPSNAP_BIN),$(ACPSNAP_BIN)/,)acpsnap-replay -d '$(ACPSNAP_SNAPSHOTS)' \
           $(if $(ACPSNAP_PROFILE),-p '$(ACPSNAP_PROFILE)') -j $(ACPSNAP_JOBS)

.PHONY: acpsnap-replay acpsnap-record acpsnap-refresh acpsnap-update acpsnap-list
acpsnap-replay:
	@$(_acpsnap) --mode replay '$(SCENARIO)'
acpsnap-record:
	@$(_acpsnap) --mode record '$(SCENARIO)'
acpsnap-refresh:
	@$(_acpsnap) --mode refresh '$(SCENARIO)'
acpsnap-update:
	@$(_acpsnap) --mode update '$(SCENARIO)'
acpsnap-list:
	@$(_acpsnap) --list '$(SCENARIO)'

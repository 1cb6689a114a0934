# example.mk - what the worked examples' Makefiles share. An example sets
# AGENT_NAME, AGENT_PKG and AGENT_VERSION (the npm package it installs into
# build/agents/AGENT_NAME), then includes this: the targets of
# share/acpsnap.mk on its snapshots/ and agent.profile, the pinned agent, and
# record-loopback.
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -ec

TOP       := ../..
AGENT_DIR := $(TOP)/build/agents/$(AGENT_NAME)

ACPSNAP_SNAPSHOTS := snapshots
ACPSNAP_PROFILE   := agent.profile
ACPSNAP_BIN       := $(abspath $(TOP)/build/rel/bin)
ACPSNAP_PREREQS   := tools agent
include $(TOP)/share/acpsnap.mk

.PHONY: tools agent record-loopback
# Records the recorded scenarios again through the recording proxy, each
# with a loopback replay-serve on its provider.jsonl as the live provider
# (../record-loopback); the fixtures must come out unchanged.
record-loopback: tools agent
	@../record-loopback $(ACPSNAP_SNAPSHOTS) $(ACPSNAP_BIN) $(MAKE) --no-print-directory
# The acpsnap tools of this tree (build/rel/bin).
tools:
	@$(MAKE) --no-print-directory -C $(TOP) tools
# The pinned agent: installed when absent or of another version.
agent:
	@v=$$(jq -r .version $(AGENT_DIR)/node_modules/$(AGENT_PKG)/package.json 2>/dev/null || true); \
	[ "$$v" = $(AGENT_VERSION) ] || npm install --no-save --no-audit --no-fund --prefix $(AGENT_DIR) $(AGENT_PKG)@$(AGENT_VERSION)

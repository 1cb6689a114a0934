# acpsnap-profile(5) of codex-acp (@zed-industries/codex-acp-linux-x64,
# pinned in the Makefile, which installs it under the build directory).
# codex talks to an HTTP provider on the OpenAI Responses wire and persists
# no session log acpsnap reads, so every scenario is transcript-only and
# replay-serve is its provider.
#
# The configuration is all on the command line (-c key=value): codex's
# built-in local provider (model_provider=ollama), which speaks the
# Responses wire to the base URL in CODEX_OSS_BASE_URL and needs no login;
# a model codex has metadata for (else its first turn opens with a warning
# message); edits ask for approval (the read-only sandbox, approval on
# request); no update check, no analytics.
command = ../../build/agents/codex/node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp -c model_provider=ollama -c model=gpt-5.4 -c approval_policy=on-request -c sandbox_mode=read-only -c check_for_update_on_startup=false -c analytics.enabled=false
provider = replay-serve
env = CODEX_OSS_BASE_URL=${ACPSNAP_PROVIDER_URL}/v1
rules = rules.jq
rpc-timeout = 20000
# A private, empty CODEX_HOME: no user config, auth or session state leaks
# in, and the run leaves nothing behind.
mkdir = codex-home
env = CODEX_HOME=${ACPSNAP_RUN_ROOT}/codex-home
# codex-acp does not exit when its input ends: SIGTERM it half a second
# later (a clean stop).
term-timeout = 500

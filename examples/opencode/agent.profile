# acpsnap-profile(5) of opencode (opencode-linux-x64, pinned in the
# Makefile, which installs it under the build directory). opencode talks to
# an OpenAI-compatible HTTP provider and persists no session log acpsnap
# reads, so every scenario is transcript-only and replay-serve is its
# provider.
command = ../../build/agents/opencode/node_modules/opencode-linux-x64/bin/opencode acp
provider = replay-serve
rules = rules.jq
rpc-timeout = 20000
# A private home: no user config, auth, plugin or session state leaks in,
# and the run leaves nothing behind.
mkdir = home
env = HOME=${ACPSNAP_RUN_ROOT}/home
env = XDG_CONFIG_HOME=${ACPSNAP_RUN_ROOT}/home/.config
env = XDG_DATA_HOME=${ACPSNAP_RUN_ROOT}/home/.local/share
env = XDG_STATE_HOME=${ACPSNAP_RUN_ROOT}/home/.local/state
env = XDG_CACHE_HOME=${ACPSNAP_RUN_ROOT}/home/.cache
# No network: no update check, no models.dev list, no sharing, no plugin,
# LSP or skill downloads.
env = OPENCODE_DISABLE_AUTOUPDATE=1
env = OPENCODE_DISABLE_MODELS_FETCH=1
env = OPENCODE_DISABLE_SHARE=1
env = OPENCODE_DISABLE_DEFAULT_PLUGINS=1
env = OPENCODE_DISABLE_LSP_DOWNLOAD=1
env = OPENCODE_DISABLE_CLAUDE_CODE=1
env = OPENCODE_DISABLE_EXTERNAL_SKILLS=1
# The whole configuration: one model "m" of a provider "replay" at
# replay-serve's URL; edits ask for permission; the title agent is off (it
# would make a second model call, concurrent with the turn's).
env = OPENCODE_CONFIG_CONTENT={"model":"replay/m","share":"disabled","autoupdate":false,"permission":{"edit":"ask"},"agent":{"title":{"disable":true}},"provider":{"replay":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"${ACPSNAP_PROVIDER_URL}/v1","apiKey":"none"},"models":{"m":{}}}}}

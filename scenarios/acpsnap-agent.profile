# acpsnap-profile(5) of the reference agent (acpsnap-agent, built from example/).
# A bare program name is looked up in PATH: acpsnap-replay puts its own
# directory first, so `make replay` runs the agent of the same build
# (build/rel/bin, or build/asan/bin with SANITIZE=1), an installed
# acpsnap-replay the installed one.
command = acpsnap-agent
# Logs land in <sessions root>/<sessionId>/session.jsonl[.zstd].
harvest = */session.jsonl */session.jsonl.zstd
# Replay: the script acp-drive derived from the fixture (and override).
replay.env = ACPSNAP_REPLAY_SCRIPT=${ACPSNAP_REPLAY_SCRIPT}
# A replay's logs live in a sessions root removed after the run: written at
# every durable boundary (what the waits read), not fsynced.
replay.env = ACPSNAP_SYNC=none
# Record: the live DeepSeek adapter, or a loopback replay-serve when the
# pipeline provides one; raw persistence keeps the harvest line-readable.
record.env = ACPSNAP_PERSISTENCE=raw
record.env = DEEPSEEK_BASE_URL=${ACPSNAP_PROVIDER_URL:-${DEEPSEEK_BASE_URL:-https://api.deepseek.com}}
record.env = DEEPSEEK_API_KEY=${ACPSNAP_PROVIDER_KEY:-${DEEPSEEK_API_KEY:-}}
# A scenario's configPath (relative to the snapshots directory) is the config.
env = ACPSNAP_AGENT_CONFIG=${ACPSNAP_CONFIG_PATH:-}

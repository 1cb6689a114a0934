# scrub(1) rules for codex-acp's transcript (acpsnap-profile(5), rules).
# A permission request carries the time its tool call started, and a
# patch's changes are keyed by absolute path, where the built-in cwd rule
# (string values) does not look.
walk(if type == "object" then
        (if has("started_at_ms") then .started_at_ms = "{{startedAtMs}}" else . end)
        | with_entries(.key |= (split($cwd) | join("{{cwd}}")))
     else . end)

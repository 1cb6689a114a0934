# scrub(1) rules for opencode's transcript (acpsnap-profile(5), rules).
# Its message and part ids are new on every run: number them in order of
# first appearance. A tool title names the written file by the cwd without
# its leading slash, which the built-in cwd rule does not see.
renumber("msg_[0-9A-Za-z]+"; "msgId")
| renumber("prt_[0-9A-Za-z]+"; "partId")
| ($cwd | ltrimstr("/")) as $rel
| walk(if type == "string" then split($rel) | join("{{cwdRelative}}") else . end)

#!/bin/sh
# Writes client/lua/throttle.lua, the Lua twin the crate embeds and users load, from its parts:
# client/lua/src/*.lua in the order of their names (the two-digit prefix), each without its
# first line (the note that says to run this). Run it after editing a part:
#
#     client/lua/join.sh
#
# A test (module/bucket/tests/lua_parts.rs) fails while the kept file and the parts differ.
set -eu
cd "$(dirname "$0")"
LC_ALL=C
export LC_ALL
for part in src/[0-9][0-9]-*.lua; do
    tail -n +2 "$part"
done > throttle.lua.new
mv throttle.lua.new throttle.lua

#!/usr/bin/env bash
# A newcomer's first session with the `roost` command, against a running `roost up`:
# create a topic, produce 10,000 keyed lines from a file, read them back (as JSON and with a
# format string), read a time range, see a group fall behind, seek the group (plan, then execute),
# trim a partition, delete the topic. Every step checks what it did and the script stops at the
# first surprise (set -e).
#
#   ROOST_BOOTSTRAP=127.0.0.1:9092 examples/cli/newcomer.sh
#   CHECKER=kcat ROOST_BOOTSTRAP=127.0.0.1:9092 examples/cli/newcomer.sh   # kcat reads back instead
#
# ROOST names the command (default: roost); CHECKER decides which tool reads the records back to
# check them: roost itself, or kcat, which shares no code with Roost. Needs jq.
set -euo pipefail

ROOST=${ROOST:-roost}
CHECKER=${CHECKER:-roost}
: "${ROOST_BOOTSTRAP:?set ROOST_BOOTSTRAP to the broker, e.g. 127.0.0.1:9092}"
export ROOST_BOOTSTRAP
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
topic=newcomer-$CHECKER-$$
group=$topic-readers
say() { printf '== %s\n' "$*"; }
fail() { printf 'FAILED: %s\n' "$*" >&2; exit 1; }

# Every record of a topic as "key value" lines, sorted (partitions interleave).
read_back() {
  if [ "$CHECKER" = kcat ]; then
    kcat -b "$ROOST_BOOTSTRAP" -C -t "$1" -e -q -f '%k %s\n'
  else
    $ROOST consume "$1" -o :end -f '%k %v\n'
  fi | sort
}

say "create $topic with 3 partitions"
$ROOST topic create "$topic" -p 3
$ROOST topic list --format json | jq -e --arg t "$topic" 'map(select(.name == $t)) | length == 1' >/dev/null \
  || fail "topic list does not show $topic"

say "produce 10,000 keyed lines from a file"
for i in $(seq 1 10000); do echo "user-$((i % 97)) message-$i"; done > "$work/lines.txt"
$ROOST produce "$topic" -f '%k %v\n' --file "$work/lines.txt"
sort "$work/lines.txt" > "$work/expected.txt"

say "read them back with a format string ($CHECKER)"
read_back "$topic" > "$work/formatted.txt"
cmp -s "$work/expected.txt" "$work/formatted.txt" || fail "records read back differ from the file"

say "read them back as JSON"
if [ "$CHECKER" = kcat ]; then
  kcat -b "$ROOST_BOOTSTRAP" -C -t "$topic" -e -q -J | jq -r '"\(.key) \(.payload)"'
else
  $ROOST consume "$topic" -o :end --json | jq -r '"\(.key) \(.value)"'
fi | sort > "$work/json.txt"
cmp -s "$work/expected.txt" "$work/json.txt" || fail "JSON records differ from the file"

say "a time range with @"
stamps="$topic-stamps"
$ROOST topic create "$stamps" -p 1
printf '%s\n' "1700000000000 a first" "1700000060000 b second" "1700000120000 c third" \
  | $ROOST produce "$stamps" -f '%T %k %v\n'
if [ "$CHECKER" = kcat ]; then
  kcat -b "$ROOST_BOOTSTRAP" -C -t "$stamps" -o s@1700000030000 -o e@1700000090000 -e -q -f '%k %s\n'
else
  $ROOST consume "$stamps" -o @2023-11-14T22:13:50Z:2023-11-14T22:14:50Z -f '%k %v\n'
fi > "$work/range.txt"
[ "$(cat "$work/range.txt")" = "b second" ] || fail "the time range gave: $(cat "$work/range.txt")"

say "a group reads everything; 500 more records arrive: it is 500 behind"
$ROOST consume "$topic" -g "$group" -e > /dev/null
lag() { $ROOST group describe "$group" --format json | jq '.summary[0].total_lag'; }
[ "$(lag)" = 0 ] || fail "after reading everything the lag is $(lag)"
for i in $(seq 1 500); do echo "late-$((i % 7)) message-$i"; done | $ROOST produce "$topic" -f '%k %v\n'
[ "$(lag)" = 500 ] || fail "lag is $(lag), expected 500"

say "seek the group to the start: the plan changes nothing, --execute does"
$ROOST group seek "$group" --to start > "$work/plan.txt"
[ "$(lag)" = 500 ] || fail "the dry run moved the group (lag $(lag))"
$ROOST group seek "$group" --to start --execute > /dev/null
[ "$(lag)" = 10500 ] || fail "after --execute the lag is $(lag), expected 10500"

say "trim partition 0 below offset 10"
$ROOST topic trim "$topic" -p 0 -o 10
if [ "$CHECKER" = kcat ]; then
  first=$(kcat -b "$ROOST_BOOTSTRAP" -C -t "$topic" -p 0 -o beginning -c 1 -e -q -f '%o\n')
else
  first=$($ROOST consume "$topic" -p 0 -o start -n 1 -f '%o\n')
fi
[ "$first" = 10 ] || fail "partition 0 starts at $first after the trim, expected 10"

say "delete the topics"
$ROOST topic delete "$topic" "$stamps"
if $ROOST topic list --format json | jq -e --arg t "$topic" 'map(select(.name == $t)) | length > 0' >/dev/null; then
  fail "$topic is still listed"
fi
say "all steps passed ($CHECKER checking)"

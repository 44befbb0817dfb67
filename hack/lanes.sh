#!/usr/bin/env bash
# make test's lanes, run at once: NAME=COMMAND ... Each lane's lines are printed as they come,
# prefixed with [NAME]; at the end, one line a lane with its exit code and time. Exit 1 if any
# lane failed.
#
# Why lanes: the real control plane's lane (its build, the e2e suite on it) is the longest;
# everything else (lint, types, layers, the unit tests, the e2e suite on kubesim) runs beside
# it, on the core it leaves idle while it waits on the API server. The unit tests that start
# control planes of their own come last in the other lane (Makefile): put in the real lane,
# they made it 3 to 4 minutes longer while the other lane had finished and idled for 9.
# Their control planes run beside the e2e suite's, as the suite's own autoscaling and upgrade
# tests run theirs: each on free ports and in its own folder, from the one cached build (its
# file lock makes a lane that needs the build wait for the other lane's).
set -uo pipefail

width=0
for lane in "$@"; do
	name=${lane%%=*}
	(( ${#name} > width )) && width=${#name}
done

declare -a pids names starts
for lane in "$@"; do
	name=${lane%%=*}
	command=${lane#*=}
	prefix=$(printf "[%-${width}s] " "$name")
	(
		start=$SECONDS
		bash -c "$command" 2>&1 | sed -u "s/^/${prefix//\//\\/}/"
		rc=${PIPESTATUS[0]}
		echo "${prefix}lane done: exit ${rc} after $((SECONDS - start)) s"
		exit "$rc"
	) &
	pids+=($!)
	names+=("$name")
done

failed=0
summary=()
for i in "${!pids[@]}"; do
	if wait "${pids[$i]}"; then
		summary+=("  ${names[$i]}: passed")
	else
		summary+=("  ${names[$i]}: FAILED")
		failed=1
	fi
done
echo "make test lanes:"
printf '%s\n' "${summary[@]}"
exit "$failed"

#!/usr/bin/env bash
# scripts/watchdog.sh MINUTES COMMAND [ARGUMENT...]
#
# Runs COMMAND; if it is still running after MINUTES, prints what each of its
# processes is doing (every thread's stack, through gdb when it is installed;
# the kernel's wait channel otherwise), kills them all and exits 124.
#
# Why: a test run that hangs on CI uses up the whole run's time limit, and a
# test binary writing to a pipe buffers its output, so the log stops kilobytes
# before the test that hung. The stacks say where it hung.
set -u
minutes=$1
shift

# The processes whose parent is $1, and theirs, and so on (ps where it is
# installed; /proc otherwise).
children() {
    if command -v ps > /dev/null; then
        ps -o pid= --ppid "$1" 2>/dev/null
    else
        grep -l "^PPid:[[:space:]]*$1\$" /proc/[0-9]*/status 2>/dev/null | cut -d/ -f3
    fi
}
descendants() {
    local child
    for child in $(children "$1"); do
        echo "$child"
        descendants "$child"
    done
}

fired=$(mktemp)
rm -f "$fired"
"$@" &
command_pid=$!

(
    # Stopped (TERM) when the command ends first, with its sleep: nothing is
    # left behind holding the caller's pipes open.
    trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
    sleep $((minutes * 60)) < /dev/null > /dev/null 2>&1 &
    sleeper=$!
    wait "$sleeper"
    kill -0 "$command_pid" 2>/dev/null || exit 0
    touch "$fired"
    processes="$command_pid $(descendants "$command_pid")"
    {
        echo "watchdog: '$*' is still running after $minutes min; what its processes are doing:"
        for pid in $processes; do
            echo "--- process $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-300)"
            if command -v gdb > /dev/null; then
                timeout 120 gdb -p "$pid" -batch -nx -ex 'set pagination off' -ex 'thread apply all bt 40' 2>/dev/null \
                    | grep -E '^(Thread|#)' | cut -c1-400
            else
                for task in /proc/"$pid"/task/*; do
                    echo "thread ${task##*/}: $(cat "$task/comm" 2>/dev/null) waiting in $(cat "$task/wchan" 2>/dev/null)"
                done
            fi
        done
        echo "watchdog: killing them"
    } >&2
    for pid in $processes; do kill -KILL "$pid" 2>/dev/null; done
) &
watchdog_pid=$!

wait "$command_pid"
status=$?
if [ -e "$fired" ]; then
    wait "$watchdog_pid"
    rm -f "$fired"
    exit 124
fi
kill "$watchdog_pid" 2>/dev/null
wait "$watchdog_pid" 2>/dev/null
exit "$status"

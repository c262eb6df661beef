# Sourced by the scripts that time whole pipelines on the GPU machine (scripts/bench/ends.sh,
# scripts/bench/pipetrace.sh): each pipeline run again and again in turn, so that a machine whose
# speed drifts (by a third within minutes on the H200) weighs on all of them alike.

# The median of the numbers on standard input (one or more a line).
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# Runs each named pipeline $runs times, interleaved (standard error appended to $err);
# prints each one's figures (UNIT ms: wall milliseconds; UNIT fps: $frames over the wall
# time) and their median.
interleaved() { # UNIT NAME CMD [NAME CMD ...]
    local unit=$1 names=() cmds=() i s e
    shift
    while [ $# -gt 0 ]; do names+=("$1") cmds+=("$2"); shift 2; done
    local -A all
    for _ in $(seq "$runs"); do
        for i in "${!cmds[@]}"; do
            s=$(date +%s%N)
            bash -o pipefail -c "${cmds[$i]}" >/dev/null 2>>"$err" || echo "failed: ${names[$i]}" >>"$err"
            e=$(date +%s%N)
            all[$i]="${all[$i]:-} $(awk -v u="$unit" -v n="$frames" -v s="$s" -v e="$e" \
                'BEGIN { d = (e - s) / 1e9; if (u == "ms") printf "%.0f", d * 1000; else printf "%.0f", n / d }')"
        done
    done
    for i in "${!cmds[@]}"; do
        printf "%-46s %s  median %s %s\n" "${names[$i]}" "${all[$i]}" "$(echo "${all[$i]}" | median)" "$unit"
    done
}

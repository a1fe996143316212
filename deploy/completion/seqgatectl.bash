# bash completion for seqgatectl (installed by meson into the
# bash-completion directory as "seqgatectl"; or: source this file).
# Commands and their options as `seqgatectl --help` lists them;
# tests/deploy/check_completion.py fails when the help names one this
# file does not offer. Needs nothing from the bash-completion package.

_seqgatectl_commands="inspect partitions lookup replay release simulate dlq sizing audit version"
_seqgatectl_dlq_commands="summary tail"
_seqgatectl_common="--config --json --log-level --help"

# _seqgatectl_options COMMAND: the options COMMAND takes besides the common
# ones, as `seqgatectl COMMAND --help` lists them (--data-dir where it reads
# a store, -X where it talks to Kafka)
_seqgatectl_options() {
    case $1 in
    inspect) echo "-t --topic -p --partition -a --aggregate -l --limit -m --max-age-ms --data-dir" ;;
    partitions) echo "--data-dir" ;;
    lookup) echo "-t --topic -s --source -i --id -m --max-age-ms --data-dir" ;;
    replay) echo "-d --dlq -r --reason --all -a --aggregate -P --dlq-partition -f --from-offset -u --until-offset -l --limit -n --dry-run -T --timeout-ms -X" ;;
    release) echo "-t --topic -p --partition -a --aggregate -v --version -s --state -w --wait -T --timeout-ms --data-dir -X" ;;
    simulate) echo "-e --expect -t --topic -p --partition" ;;
    "dlq summary") echo "-d --dlq --from --to --top -X" ;;
    "dlq tail") echo "-d --dlq -n --lines -f --follow -X" ;;
    sizing) echo "-e --events-per-day -a --aggregates --data-dir" ;;
    audit) echo "-t --topic --from --to --html --max-aggregates --max-keys --timeout-ms -X" ;;
    esac
}

# _seqgatectl_reasons: the DLQ reasons --reason takes (docs/dlq.md
# "DLQ headers")
_seqgatectl_reasons="malformed idempotency_conflict stale_version version_jump park_overflow gap_timeout aggregate_quarantined illegal_transition unknown_event_type version_conflict output_rejected fenced_epoch"

_seqgatectl() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=""
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()

    if ((COMP_CWORD == 1)); then
        mapfile -t COMPREPLY < <(compgen -W "$_seqgatectl_commands --help --version -V" -- "$cur")
        return 0
    fi

    local cmd=${COMP_WORDS[1]}
    if [[ $cmd == dlq ]]; then
        if ((COMP_CWORD == 2)); then
            mapfile -t COMPREPLY < <(compgen -W "$_seqgatectl_dlq_commands" -- "$cur")
            return 0
        fi
        cmd="dlq ${COMP_WORDS[2]}"
    fi

    case $prev in
    -c | --config | --expect | --html)
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return 0
        ;;
    --data-dir)
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
        return 0
        ;;
    --log-level)
        mapfile -t COMPREPLY < <(compgen -W "error warning notice info debug" -- "$cur")
        return 0
        ;;
    --reason | -r)
        mapfile -t COMPREPLY < <(compgen -W "$_seqgatectl_reasons" -- "$cur")
        return 0
        ;;
    --topic | --partition | --aggregate | --limit | --dlq | --dlq-partition | \
        --from-offset | --until-offset | --timeout-ms | --version | --state | \
        --source | --id | --from | --to | --top | --lines | --events-per-day | \
        --aggregates | --max-aggregates | --max-keys | -X)
        return 0 # a value seqgatectl cannot know offline
        ;;
    -e) # simulate --expect FILE; sizing --events-per-day N
        if [[ $cmd == simulate ]]; then
            compopt -o filenames 2>/dev/null
            mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        fi
        return 0
        ;;
    -n) # dlq tail -n N; replay's -n (--dry-run) takes none
        [[ $cmd == "dlq tail" ]] && return 0
        ;;
    -f) # replay -f N (--from-offset); dlq tail's -f (--follow) takes none
        [[ $cmd == replay ]] && return 0
        ;;
    -t | -p | -a | -l | -d | -P | -u | -T | -v | -s | -i)
        return 0 # a value seqgatectl cannot know offline
        ;;
    esac

    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_seqgatectl_options "$cmd") $_seqgatectl_common" -- "$cur")
    elif [[ $cmd == simulate ]]; then
        compopt -o filenames 2>/dev/null
        mapfile -t COMPREPLY < <(compgen -f -- "$cur") # the records file
    fi
    return 0
}

complete -F _seqgatectl seqgatectl

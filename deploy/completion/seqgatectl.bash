# bash completion for seqgatectl (installed by meson into the
# bash-completion directory as "seqgatectl"; or: source this file).
# Commands and their options as `seqgatectl --help` lists them;
# tests/deploy/check_completion.py fails when the help names one this
# file does not offer. Needs nothing from the bash-completion package.

_seqgatectl_commands="inspect partitions lookup replay release simulate dlq sizing audit version"
_seqgatectl_dlq_commands="summary tail"
_seqgatectl_common="--config --data-dir -X --json --log-level --help"

# _seqgatectl_options COMMAND: the options COMMAND takes besides the common ones
_seqgatectl_options() {
    case $1 in
    inspect) echo "--topic --partition --aggregate --limit" ;;
    partitions) echo "" ;;
    lookup) echo "--topic --source --id" ;;
    replay) echo "--dlq --reason --all --aggregate --dlq-partition --from-offset --until-offset --limit --dry-run --timeout-ms" ;;
    release) echo "--topic --partition --aggregate --version --state --wait --timeout-ms" ;;
    simulate) echo "--topic --partition --expect" ;;
    "dlq summary") echo "--from --to" ;;
    "dlq tail") echo "-n -f --follow" ;;
    sizing) echo "--events-per-day" ;;
    audit) echo "--topic --from --to --html" ;;
    esac
}

# _seqgatectl_reasons: the DLQ reasons --reason takes (README "DLQ records")
_seqgatectl_reasons="malformed idempotency_conflict stale_version version_jump park_overflow gap_timeout aggregate_quarantined illegal_transition unknown_event_type output_rejected fenced_epoch"

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
    --reason)
        mapfile -t COMPREPLY < <(compgen -W "$_seqgatectl_reasons" -- "$cur")
        return 0
        ;;
    --topic | --partition | --aggregate | --limit | --dlq | --dlq-partition | \
        --from-offset | --until-offset | --timeout-ms | --version | --state | \
        --source | --id | --from | --to | --events-per-day | -n | -X)
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

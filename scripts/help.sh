# -h / --help for the shell recipes (sourced by each, right after `set -euo pipefail`):
#
#   source "$(dirname "$0")/help.sh" "$@"
#
# When -h or --help is among the recipe's arguments, this prints the recipe's header comment
# and the environment variables it reads (its knobs, as `NAME=${NAME:-default}`, also those of
# the files it sources, e.g. sweet_stages.sh), then exits 0 before the recipe does anything.
# Otherwise it does nothing. It only reads the recipe's text: no file is written, nothing runs.
case " $* " in
  *" -h "* | *" --help "*)
    # the header: every line after the #! line, up to `set -euo pipefail`, without its '#'
    awk 'NR == 1 && /^#!/ { next } /^set -euo pipefail/ { exit } { sub(/^# ?/, ""); print }' \
      "$0"
    _help_root=$(cd "$(dirname "$0")/.." && pwd)
    _help_files=("$0")
    while read -r _help_sourced; do
      if [ -f "$_help_root/$_help_sourced" ]; then
        _help_files+=("$_help_root/$_help_sourced")
      fi
    done < <(sed -nE 's/^[[:space:]]*(source|\.)[[:space:]]+(scripts\/[A-Za-z0-9_]+\.sh).*/\2/p' \
      "$0")
    echo
    echo "Knobs (environment variables, each with its default as the recipe sets it):"
    grep -hE '^[[:space:]]*(export[[:space:]]+)?[A-Z][A-Z0-9_]*="?\$\{[A-Z][A-Z0-9_]*:-' \
      "${_help_files[@]}" | sed -E 's/^[[:space:]]+//; s/^export[[:space:]]+//; s/^/  /' || true
    exit 0
    ;;
esac

cd "$1" || { echo "DECKHAND-ARTIFACTS-ERROR cannot enter the volume"; exit 1; }
MAXFILE=$2 MAXBYTES=$3 KEEP=$4
set -f
IFS='
'
seen=''
pass=0
while :; do
  now=$(date +%s)
  next=''
  dir=''
  used=0
  for f in $(find . -path ./.deckhand -prune -o -type f -print 2>/dev/null | head -n 256); do
    st=$(stat -c '%s %Y' "$f" 2>/dev/null) || continue
    size=${st% *}
    mtime=${st#* }
    key="$f $size $mtime"
    case "$seen" in *"
$key
"*) next="$next
$key
"; continue ;; esac
    [ "$mtime" -lt "$((now - 1))" ] || continue
    next="$next
$key
"
    keep=$((MAXBYTES - used))
    [ "$keep" -le "$MAXFILE" ] || keep=$MAXFILE
    [ "$keep" -le "$size" ] || keep=$size
    sum=- copy=- err=-
    if [ ! -r "$f" ]; then
      err=unreadable keep=0
    elif [ "$keep" -le 0 ] && [ "$size" -gt 0 ]; then
      err=maxBytes keep=0
    elif [ "$KEEP" -gt 0 ]; then
      [ -n "$dir" ] || { dir=.deckhand/$now; mkdir -p "$dir"; }
      c="$dir/$(echo "${f#./}" | tr / _)"
      if head -c "$keep" "$f" >"$c" 2>/dev/null; then
        keep=$(wc -c <"$c")
        sum=$(sha256sum <"$c")
        copy=$dir
      else
        rm -f "$c"
        err=notCopied keep=0
      fi
    else
      sum=$(head -c "$keep" "$f" | sha256sum)
    fi
    used=$((used + keep))
    echo "DECKHAND-ARTIFACT $mtime $size $keep ${sum%% *} $copy $err ${f#./}"
  done
  if [ -n "$dir" ]; then
    n=$(ls .deckhand | wc -l)
    if [ "$n" -gt "$KEEP" ]; then
      for o in $(ls .deckhand | sort -n | head -n "$((n - KEEP))"); do rm -rf ".deckhand/$o"; done
    fi
  fi
  seen=$next
  pass=$((pass + 1))
  [ -z "$dir" ] && [ $((pass % 2)) -ne 0 ] || echo "DECKHAND-ARTIFACTS-SCANNED $now"
  sleep 1
done

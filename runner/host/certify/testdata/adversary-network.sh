#!/bin/bash
# A hostile harness's look around its sandbox (run as the task user by
# TestCertifyHarnessReachesOnlyTheRelay after the mini-agent's turn).
# Usage: adversary-network.sh MODEL_URL HOME RUNTIME_DIR OWNER_DIR
# It writes what it found into HOME/adv, which the test captures.
url=$1 home=$2 rt=$3 owner=$4
out=$home/adv
mkdir -p "$out"
hp=${url#http://}; hp=${hp%%/*}
echo "${hp##*:}" > "$out/relay_port"
id -u > "$out/uid"
ls /sys/class/net > "$out/ifaces"

# Every port listening in this network namespace, as the kernel lists it.
for f in /proc/net/tcp /proc/net/tcp6; do
  [ -r "$f" ] || continue
  tail -n +2 "$f" | while read -r _ local _ st _; do
    [ "$st" = 0A ] && printf '%d\n' "0x${local##*:}"
  done
done | sort -un > "$out/listen"

# Every TCP port of 127.0.0.1 and ::1 that accepts a connection.
perl -MIO::Socket::IP -e '
  for my $h ("127.0.0.1", "::1") {
    for my $p (1..65535) {
      my $s = IO::Socket::IP->new(PeerHost => $h, PeerPort => $p, Timeout => 1) or next;
      # A connect to a free ephemeral port can meet itself (TCP
      # simultaneous open): that is no listener.
      print "$h $p\n" unless $s->sockport == $p;
      close $s;
    }
  }' > "$out/scan" 2>/dev/null

# Unix sockets this network namespace knows (the host's abstract ones,
# containerd's shims among them, show here on network host), and socket
# files anywhere in the filesystem: a positive control of our own first.
perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $ARGV[0], Listen => 1) or die "$!"' "$home/ctl.sock"
tail -n +2 /proc/net/unix | wc -l > "$out/unix_count"
find / -xdev \( -path /proc -o -path /sys \) -prune -o -type s -print 2>/dev/null | sort > "$out/socket_files"
rm -f "$home/ctl.sock"

# The owner's and the runtime's volumes: write, append, chmod.
: > "$out/volume_writes"
for d in "$owner" "$rt"; do
  for f in "$d"/*; do [ -f "$f" ] && break; done
  touch "$d/adv-new" 2>> "$out/volume_errors" && echo "created $d/adv-new" >> "$out/volume_writes"
  (: >> "$f") 2>> "$out/volume_errors" && echo "appended $f" >> "$out/volume_writes"
  chmod 777 "$d" 2>> "$out/volume_errors" && echo "chmod $d" >> "$out/volume_writes"
done
# Positive control: the same writes where this user may write.
touch "$home/adv-new" && (: >> "$home/adv-new") && chmod 777 "$home/adv-new" && echo ok > "$out/own_writes"

# The session agent: find it, then signal it and read its fds and env.
ap=
for d in /proc/[0-9]*; do
  c=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)
  case "$c" in "$owner/sandagent serve"*) ap=${d#/proc/} ;; esac
done
echo "$ap" > "$out/agent_pid"
: > "$out/agent_hits"
if [ -n "$ap" ]; then
  kill -STOP "$ap" 2>/dev/null && echo stopped >> "$out/agent_hits" && kill -CONT "$ap"
  kill -KILL "$ap" 2>/dev/null && echo killed >> "$out/agent_hits"
  ls "/proc/$ap/fd" > /dev/null 2>&1 && echo fds >> "$out/agent_hits"
  cat "/proc/$ap/environ" > /dev/null 2>&1 && echo environ >> "$out/agent_hits"
fi
# Positive control: the same signals reach a process of our own.
sleep 300 & sp=$!
kill -STOP "$sp" && kill -KILL "$sp" && echo ok > "$out/own_signals"
wait "$sp" 2>/dev/null
exit 0

#!/usr/bin/env bash
# cut-heal.sh: three real `sluice agent` processes on loopback, one of them
# cut off with iptables, keys spent on the other side, the cut healed, and
# nothing more sent: every node must then answer, for every key, what the
# whole fleet has left. Then node-c is killed with -9 and restarted, and
# must answer the same.
#
# Needs root and iptables (Debian: apt-get install iptables). node-c runs as
# the user sluicec (made if missing), so that everything it sends can be
# dropped by uid. Uses 127.0.0.1 ports 7170-7172 (gRPC) and 7956-7958
# (gossip). Run from the repository root:
#
#   sudo bash chaos/agents/cut-heal.sh
#
# Prints the remaining count of each key on each node, before the cut and
# 1, 3 and 10 s after the heal; it exits 1 if any differs from the fleet's.
set -u
U=$(mktemp -d /tmp/cut-heal.XXXX)
go build -o "$U/sluice" ./cmd/sluice || exit 2
id sluicec >/dev/null 2>&1 || useradd -M -s /usr/sbin/nologin sluicec || exit 2
chmod 755 "$U"
uncut() {
  iptables -D OUTPUT -o lo -m owner --uid-owner sluicec -j DROP 2>/dev/null
  iptables -D INPUT -i lo -p tcp -m multiport --dports 7172,7958 -j DROP 2>/dev/null
  iptables -D INPUT -i lo -p udp --dport 7958 -j DROP 2>/dev/null
}
trap 'uncut; pkill -f "$U/sluice agent"; rm -rf "$U"' EXIT
for n in a:0 b:1 c:2; do
  name=${n%%:*}; i=${n##*:}
  {
    echo "name: node-$name"
    echo "grpc_addr: 127.0.0.1:$((7170 + i))"
    echo "gossip_addr: 127.0.0.1:$((7956 + i))"
    [ "$i" -gt 0 ] && echo "join: [127.0.0.1:7956]"
    echo "rules:"
    echo "  - {name: ledger, count: 1000, time_window: 3600, window_type: fixed, sync_interval: 0.2}"
  } > "$U/$name.yaml"
  chmod 644 "$U/$name.yaml"
done
"$U/sluice" agent --config "$U/a.yaml" > "$U/a.log" 2>&1 &
sleep 1
"$U/sluice" agent --config "$U/b.yaml" > "$U/b.log" 2>&1 &
runuser -u sluicec -- "$U/sluice" agent --config "$U/c.yaml" > "$U/c.log" 2>&1 &
alive() { "$U/sluice" members --addr "127.0.0.1:$1" 2>/dev/null | grep -c ' alive '; }
wait_alive() { # port count
  for _ in $(seq 600); do [ "$(alive "$1")" = "$2" ] && return 0; sleep 0.1; done
  echo "127.0.0.1:$1 never saw $2 members alive"; exit 1
}
check() { "$U/sluice" check --addr "127.0.0.1:$1" --rule ledger --key "$2" --hits "${3:-1}"; }
keys="k0 k1 k2 k3"
spent=0
report() { # what
  local bad=0 want=$((1000 - spent)) p k got
  echo "$1 (want remaining=$want):"
  for p in 7170 7171 7172; do
    for k in $keys; do
      got=$(check $p $k 0 | grep -o 'remaining=[0-9]*')
      printf ' %s/%s %s' "$p" "$k" "$got"
      [ "$got" = "remaining=$want" ] || bad=1
    done
  done
  echo
  return $bad
}
wait_alive 7170 3 && wait_alive 7172 3
for p in 7170 7171 7172; do for k in $keys; do check $p $k >/dev/null; done; done
spent=3
sleep 1
report "before the cut"
iptables -I OUTPUT -o lo -m owner --uid-owner sluicec -j DROP
iptables -I INPUT -i lo -p tcp -m multiport --dports 7172,7958 -j DROP
iptables -I INPUT -i lo -p udp --dport 7958 -j DROP
wait_alive 7170 2
for p in 7170 7171; do for k in $keys; do for _ in 1 2 3; do check $p $k >/dev/null; done; done; done
spent=9
sleep 20 # long enough for both sides to drop each other
uncut
start=$(date +%s%N)
wait_alive 7170 3 && wait_alive 7171 3 && wait_alive 7172 3
echo "re-formed $(( ($(date +%s%N) - start) / 1000000 )) ms after the heal"
ok=0
for s in 1 3 10; do
  sleep $s
  report "+$s s" && ok=1
done
pkill -9 -u sluicec -f "$U/sluice agent"
sleep 0.5
runuser -u sluicec -- "$U/sluice" agent --config "$U/c.yaml" > "$U/c2.log" 2>&1 &
wait_alive 7172 3
sleep 1
report "node-c after kill -9 and a restart" || ok=0
[ $ok = 1 ]
